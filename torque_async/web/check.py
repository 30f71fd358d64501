"""Checks of a -web group before anything runs: one clear line each (exit 2)."""
from __future__ import annotations

import os
import resource

from ..cmdline import UsageError
from . import site

SPARE_FDS = 64                     # descriptors kept for everything else the run opens


def free_descriptors() -> tuple[int, int]:
    """(descriptors this process may still open, its limit: ulimit -n)."""
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    used = len(os.listdir("/proc/self/fd"))
    return limit - used - SPARE_FDS, limit


def check_group(plan, group) -> None:
    local, clients = group.local, group.local.p
    law = site.Law.of(local)
    if local.zipf is not None and local.zipf <= 0:
        raise UsageError(f"-zipf {local.zipf:g}: theta must be above 0 "
                         f"(P(rank r) ~ 1/r^theta; leave -zipf out for uniform picks)")
    if law.largest and law.mean > law.largest:
        raise UsageError(f"-web: the mean file size ({law.mean} bytes, -webMeanKB) is larger than "
                         f"the maximum ({law.largest} bytes, -mfile*)")
    free, limit = free_descriptors()
    held = min(local.webOpen, clients) if local.webOpen else clients
    if held > free:
        raise UsageError(f"-web: {held} files may be open at once ({clients} clients, "
                         f"-webOpen {local.webOpen or 'none'}) but only {free} descriptors are "
                         f"free (ulimit -n {limit}): set -webOpen {max(free, 1)} or raise "
                         f"ulimit -n")
    for other in plan.groups:
        if other.action == "web" and other.local.dir == local.dir and \
                site.Law.of(other.local) != law:
            raise UsageError(f"-web: groups {other.index} and {group.index} want different "
                             f"trees in -dir {local.dir}: give each its own -dir")
    why = site.problem(local.dir, law, plan.settings.allowForeign)
    if why:
        raise UsageError(f"-web: {why}")
    if not local.cfiles:
        why = site.missing(local.dir, law)
        if why:
            raise UsageError(f"-web: {why}: add -cfiles to make it (once; it stays)")
