"""Checks of a -web group before anything runs: one clear line each (exit 2). The files its
clients may hold open are counted with the run's others in limits.py."""
from __future__ import annotations

import os

from ..errors import UsageError
from ..io import tree
from ..io.uring import ENTRIES
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
    check_ring(plan, group)


def check_ring(plan, group) -> None:
    """Through the ring, each client of the loop holds a direct descriptor of the ring's table
    for its requests: more clients than the table holds are refused, with the number."""
    from ..io.engine import choose
    from ..io.uring import chains, file_slots
    from ..kinds import KINDS, LOOP
    procs = plan.procs()
    loop = sum(1 for p in procs if KINDS[p.group.action].runs_in == LOOP)
    clients = sum(1 for p in procs if p.group.action == "web")
    if choose(plan.settings.engine, loop == 1)[0] != "uring" or chains()[0] != "direct":
        return
    if clients > file_slots() and group is next(g for g in plan.groups if g.action == "web"):
        raise UsageError(f"-web: {clients} clients on the event loop, but its io_uring ring "
                         f"holds chains for {file_slots()} at once (a direct descriptor each; "
                         f"at most its {ENTRIES} SQEs and the descriptor limit, ulimit -n): "
                         f"fewer clients (-p), or -engine threads")
