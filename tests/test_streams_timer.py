"""The precise timer sources: never early, in deadline order, re-armed for earlier sleepers."""
from __future__ import annotations

import asyncio
import time

import uvloop

from torque_async.timer import PreciseTimer, Sleeper

MS = 1_000_000


def test_the_loop_timer_wakes_every_sleeper_at_or_after_its_deadline_in_order():
    async def main():
        timer = PreciseTimer()
        woke: list[tuple[int, int, int]] = []

        async def sleeper(delay: int) -> None:
            deadline = time.monotonic_ns() + delay
            t = await timer.sleep_until(deadline)
            woke.append((deadline, t, time.monotonic_ns()))
        try:
            # the later sleeper arms the timer first: the earlier ones must re-arm it
            await asyncio.gather(sleeper(30 * MS), sleeper(10 * MS), sleeper(20 * MS),
                                 sleeper(-MS))
        finally:
            timer.close()
        return woke
    woke = uvloop.run(main())
    assert len(woke) == 4
    assert [d for d, _, _ in woke] == sorted(d for d, _, _ in woke)
    for deadline, t, seen in woke:
        assert deadline <= t <= seen


def test_closing_the_timer_cancels_pending_sleepers_and_frees_its_descriptor():
    async def main():
        timer = PreciseTimer()
        pending = timer.sleep_until(time.monotonic_ns() + 10**12)
        fd = timer.fd
        timer.close()
        return pending, fd
    pending, fd = asyncio.run(main())
    assert pending.cancelled()
    try:
        import os
        os.fstat(fd)
        still_open = True
    except OSError:
        still_open = False
    assert not still_open


def test_the_thread_sleeper_never_wakes_before_its_absolute_deadline():
    sleep = Sleeper()
    deadline = time.monotonic_ns()
    for _ in range(20):
        deadline += MS
        sleep(deadline)
        assert time.monotonic_ns() >= deadline
    sleep(deadline - MS)                         # a deadline already past returns at once
