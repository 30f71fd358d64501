"""The progress line: elapsed time, an estimate of the time left, and each group's share of
the transfers it measures (a -cyclic group: its own n x i wake-ups; a stream: its frames).
The time left is the slowest group's, at the rate each has kept since the first refresh that
saw the tests running.

Printing while testing perturbs, so it is shown only on a terminal (never into a file or a
pipe) and -noProgress turns it off. A coroutine on the orchestrator's loop reads the results
array at most 4 times a second and rewrites one line on stderr; nothing runs in the tests.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Awaitable, Callable, TextIO

from .kinds import KINDS
from .results import RUNNING, Results

INTERVAL = 0.25                    # seconds between refreshes: at most 4 a second
ERASE = "\r\x1b[K"                 # back to the start of the line, clear it


def should_show(settings, stream: TextIO) -> bool:
    return not settings.noProgress and stream.isatty()


def line(procs, transfers, states, elapsed_ns: int, running_ns: int = 0) -> str:
    """'torque-async 2.3 s, about 4 s left: 0:Load 45% 1:Bcopy 12%' (group index, kind, share
    done); running_ns: how long the tests have been running (0: no estimate)."""
    head = f"torque-async {elapsed_ns / 1e9:.1f} s"
    if not any(s >= RUNNING for s in states):
        return f"{head}: setting up"
    done: dict[int, list[int]] = {}
    for p in procs:
        share = done.setdefault(p.group.index, [0, 0])
        if p.group.local.t is not None:         # -t: the share of its time (no count to share)
            goal = round(p.group.local.t * 1e9)
            share[:] = [min(running_ns, goal), goal]
            continue
        goal = KINDS[p.group.action].goal(p.group)
        share[0] += min(int(transfers[p.row]), goal)
        share[1] += goal
    left = time_left([k / goal for k, goal in done.values()], running_ns)
    labels = {p.group.index: KINDS[p.group.action].label for p in procs}
    return " ".join([head + (f", about {left:.0f} s left:" if left is not None else ":"),
                     *(f"{g}:{labels[g]} {100 * k // goal}%" for g, (k, goal) in done.items())])


def time_left(shares: list[float], running_ns: int) -> float | None:
    """Seconds until the slowest share reaches 1 at its rate so far; None before every group
    has made progress."""
    if not running_ns or min(shares) <= 0:
        return None
    return max(running_ns / 1e9 * (1 - s) / s for s in shares)


async def show(procs, results: Results, stream: TextIO,
               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
               clock: Callable[[], int] = time.monotonic_ns) -> None:
    """Refresh the line until cancelled, then erase it."""
    t0, running = clock(), None
    try:
        while True:
            await sleep(INTERVAL)
            rows, t = results.rows, clock()
            if running is None and (rows["state"] >= RUNNING).any():
                running = t                  # the rates are measured from here
            stream.write(ERASE + line(procs, rows["transfers"], rows["state"], t - t0,
                                      t - running if running is not None else 0))
            stream.flush()
    finally:
        stream.write(ERASE)
        stream.flush()


def start(plan, procs, results: Results, stream: TextIO) -> asyncio.Future | None:
    """The progress coroutine as a task on the running loop, when it is wanted."""
    return asyncio.ensure_future(show(procs, results, stream)) \
        if should_show(plan.settings, stream) else None


async def stop(task: asyncio.Future | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
