"""Checks of a -web group before anything runs: one clear line each (exit 2). The files its
clients may hold open are counted with the run's others in limits.py."""
from __future__ import annotations

import os

from ..cmdline import UsageError
from ..io import tree
from . import site


def check_group(plan, group) -> None:
    local = group.local
    law = site.Law.of(local)
    if local.zipf is not None and local.zipf <= 0:
        raise UsageError(f"-zipf {local.zipf:g}: theta must be above 0 "
                         f"(P(rank r) ~ 1/r^theta; leave -zipf out for uniform picks)")
    if law.largest and law.mean > law.largest:
        raise UsageError(f"-web: the mean file size ({law.mean} bytes, -webMeanKB) is larger than "
                         f"the maximum ({law.largest} bytes, -mfile*)")
    for other in plan.groups:
        if other.action not in ("web", "files") or other is group or \
                os.path.realpath(other.local.dir) != os.path.realpath(local.dir):
            continue
        first, second = sorted((group, other), key=lambda g: g.index)
        if other.action == "files":
            raise UsageError(f"-web: groups {first.index} and {second.index} both use -dir "
                             f"{local.dir}, one for a -files tree and one for a -web site: "
                             f"give each its own -dir")
        raise UsageError(f"-web: groups {first.index} and {second.index} both serve -dir "
                         f"{second.local.dir} (its log counts one group's appends): give "
                         f"each its own -dir, or make them one group of more clients (-p)")
    if not local.cfiles and tree.busy(local.dir):
        raise UsageError(f"-web: another torque-async run's -cfiles is making the site in "
                         f"{local.dir} now: wait for it to end, then run again")
    why = site.problem(local.dir, law, plan.settings.allowForeign)
    if why:
        raise UsageError(f"-web: {why}")
    if not local.cfiles:
        why = site.missing(local.dir, law)
        if why:
            raise UsageError(f"-web: {why}: add -cfiles to make it (once; it stays)")
