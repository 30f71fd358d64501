"""The progress line: elapsed time and each group's share of its measured transfers done.

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


def wanted(settings, stream: TextIO) -> bool:
    return not settings.noProgress and stream.isatty()


def line(procs, transfers, states, elapsed_ns: int) -> str:
    """'torque-async 2.3 s: 0:Load 45% 1:Bcopy 12% 2:Read 5120' (group index, kind, share
    done; under -t, which has no count to share, the transfers measured)."""
    head = f"torque-async {elapsed_ns / 1e9:.1f} s:"
    if not any(s >= RUNNING for s in states):
        return f"{head} setting up"
    done: dict[int, list[int]] = {}
    for p in procs:
        goal = p.group.local.n * p.group.local.i if p.group.local.t is None else 0
        share = done.setdefault(p.group.index, [0, 0])
        share[0] += min(int(transfers[p.row]), goal) if goal else int(transfers[p.row])
        share[1] += goal
    labels = {p.group.index: KINDS[p.group.action].label for p in procs}
    return " ".join([head, *(f"{g}:{labels[g]} {100 * k // goal}%" if goal else
                             f"{g}:{labels[g]} {k}"
                             for g, (k, goal) in done.items())])


async def show(procs, results: Results, stream: TextIO,
               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
               clock: Callable[[], int] = time.monotonic_ns) -> None:
    """Refresh the line until cancelled, then erase it."""
    t0 = clock()
    try:
        while True:
            await sleep(INTERVAL)
            rows = results.rows
            stream.write(ERASE + line(procs, rows["transfers"], rows["state"], clock() - t0))
            stream.flush()
    finally:
        stream.write(ERASE)
        stream.flush()


def start(plan, procs, results: Results, stream: TextIO) -> asyncio.Future | None:
    """The progress coroutine as a task on the running loop, when it is wanted."""
    return asyncio.ensure_future(show(procs, results, stream)) if wanted(plan.settings, stream) \
        else None


async def stop(task: asyncio.Future | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
