"""Checks of a parsed plan against what this version runs and what this machine has."""
from __future__ import annotations

import os
import stat
import sys

from . import cluster, limits, outputs, rtprio
from .errors import UsageError
from .inputs import kind
from .io import identity
from .kinds import KINDS, LOOP, resolve
from .plan import Plan


def not_a_file(path: str) -> str:
    """What a name that is no regular file is, in words."""
    try:
        return kind(os.stat(path).st_mode)
    except OSError:
        return "a link that leads to no file" if os.path.islink(path) else "gone"


def check(plan: Plan) -> None:
    """Raise UsageError, naming the option, for a plan that cannot run here."""
    if plan.config and not os.path.isfile(plan.config):   # a Torque.config that is none: the
        raise UsageError(f"{plan.config} is {not_a_file(plan.config)}, not a configuration "
                         f"file: remove it, or name one with -c")    # packaged workload ran
    if not plan.groups:
        raise UsageError(f"no action given: name a test (e.g. -load) or put one in "
                         f"{plan.config or 'Torque.config'}; -h for help")
    if plan.settings.g and cluster.launcher_rank() is None:   # under mpiexec: cluster.refuse
        check_key_input()
    child = plan.settings.child
    if plan.settings.baseline and child is not None:
        raise UsageError("-baseline runs every group alone and then together; -child runs one "
                         "test process: use one or the other")
    total = sum(g.local.p for g in plan.groups)
    if child is not None and child >= total:
        raise UsageError(f"-child {child}: the plan has {total} test processes (0..{total - 1})")
    procs = plan.procs()
    loop_cpu(plan)
    for path in plan.settings.files:   # who each -f file is, before it is looked at: its tests
        if path not in plan.pins and (who := identity.pin(path)) is not None:
            plan.pins[path] = who      # open for writing only that file (io/files.py)
    for g in plan.groups:
        check_cpus(g)
        check_time(g)
        if check_group := KINDS[g.action].check:
            resolve(check_group)(plan, g)
    if plan.settings.sp and len(procs) != 1:
        raise UsageError(f"-sp runs a single test process in the main process; the plan has "
                         f"{len(procs)}")
    rtprio.check(plan.settings.rtprio, any(KINDS[p.group.action].runs_in == LOOP for p in procs))
    limits.check(plan)
    outputs.check(plan)


def whole_words(plan: Plan, group) -> None:
    """-load, -store, -ls and the STREAM kernels move 64-bit words, -spinWait makes 8-byte
    doubles: a transfer holds one."""
    if group.local.size < 8:
        raise UsageError(f"-{group.action}: a transfer of {group.local.size} bytes holds no "
                         f"64-bit word: give -B 8 or more")


def check_time(group) -> None:
    """-t and -ramp: a ramp must leave time to measure."""
    local, name = group.local, f"group {group.index} (-{group.action})"
    if local.t is not None and (local.ramp or 0) >= local.t:
        raise UsageError(f"{name}: -ramp {local.ramp:g} is not shorter than -t {local.t:g}: "
                         f"the ramp is part of -t, nothing would be measured")


def check_cpus(group) -> None:
    local, allowed = group.local, os.sched_getaffinity(0)
    wanted = {
        "affinityNumber": [local.affinityNumber],
        "affinityNumberDiff": [None if local.affinityNumberDiff is None
                               else local.affinityNumberDiff + k for k in range(local.p)],
        "affinityParent": [local.affinityParent],
    }
    for name, cpus in wanted.items():
        bad = [c for c in cpus if c is not None and c not in allowed]
        if bad:
            raise UsageError(f"-{name}: CPU {bad[0]} is not available here "
                             f"(CPUs {','.join(map(str, sorted(allowed)))})")


def check_key_input() -> None:
    """-g waits for Enter on stdin, read on the event loop: a terminal, pipe or socket."""
    try:
        if sys.stdin is None:          # closed when Python started (launch.py then put
            raise OSError              # /dev/null at its number)
        mode = os.fstat(0).st_mode
    except OSError:
        raise UsageError("-g waits for Enter on stdin, which is closed") from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or (stat.S_ISCHR(mode) and not os.isatty(0)):
        raise UsageError("-g waits for Enter on stdin, which is a file or device that cannot be "
                         "waited on: run it from a terminal or pipe a line into it")


def loop_cpu(plan: Plan) -> int | None:
    """The CPU the event loop's thread is pinned to: what the loop groups' -affinityNumber (or
    -affinityNumberDiff of a single process) ask for; UsageError when they disagree."""
    asked = {}
    for g in plan.groups:
        if KINDS[g.action].runs_in != LOOP:
            continue
        local = g.local
        if local.affinityNumberDiff is not None and local.p > 1:
            raise UsageError(f"-affinityNumberDiff before -{g.action}: its {local.p} processes "
                             f"are coroutines on one event loop thread; pin it with "
                             f"-affinityNumber")
        cpu = local.affinityNumber if local.affinityNumber is not None else \
            local.affinityNumberDiff
        if cpu is not None:
            asked[g.index] = cpu
    if len(set(asked.values())) > 1:
        (g1, c1), (g2, c2) = [(g, c) for g, c in asked.items()][:2]
        raise UsageError(f"the loop tests share one thread: group {g1} pins it to CPU {c1}, "
                         f"group {g2} to CPU {c2}")
    return next(iter(asked.values()), None)
