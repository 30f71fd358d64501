"""The stream engine: every sub-stream of one stream as a coroutine, paced, gated, measured.

Transfer k of a sub-stream waits for its gates (schedule.py), then for its release time, then
moves its frame; one transfer of a sub-stream is in flight at a time. Its lateness is its
completion time (which the tracks' move returns) minus its deadline, 0 when on time. Time comes
from the injected `clock` and `sleep_until` (and the tracks), so the same engine runs on the
precise timer or on a virtual clock in tests.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from torque_async.testing.api import TestError

from ..stats import Summary
from .frames import Frames
from .schedule import READ, Pacer, Stage


class Stopped(Exception):
    """The run was stopped (another test failed, or an interrupt)."""


class Progress:
    """Transfers one sub-stream has completed; others wait for it to reach a count."""
    __slots__ = ("done", "waiters")

    def __init__(self):
        self.done = 0
        self.waiters: list[tuple[int, asyncio.Future]] = []

    def advance(self) -> None:
        self.done += 1
        if self.waiters:
            due = [w for w in self.waiters if w[0] <= self.done]
            self.waiters = [w for w in self.waiters if w[0] > self.done]
            for _, future in due:
                future.set_result(None)

    async def reach(self, count: int) -> None:
        """Wait until `count` transfers are done (called only when they are not yet)."""
        future = asyncio.get_running_loop().create_future()
        self.waiters.append((count, future))
        await future


class Lateness(Summary):
    """Lateness of one sub-stream (0 when on time), plus the late count (transfers that were
    late) and the longest run of consecutive late ones."""
    __slots__ = ("late", "run", "longest")

    def __init__(self):
        super().__init__()
        self.late = self.run = self.longest = 0

    def add(self, ns: int) -> None:
        if ns > 0:
            self.late += 1
            self.run += 1
            self.longest = max(self.longest, self.run)
        else:
            ns = self.run = 0
        super().add(ns)


Record = Callable[[int, int], None]           # (latency, end time) of one measured transfer


class Pipeline:
    def __init__(self, stages: tuple[Stage, ...], pacer: Pacer, tracks, frames: Frames,
                 clock: Callable[[], int], sleep_until: Callable[[int], Awaitable],
                 stopped: Callable[[], bool], trace: list | None = None):
        self.stages, self.pacer, self.tracks, self.frames = stages, pacer, tracks, frames
        self.clock, self.sleep_until, self.stopped = clock, sleep_until, stopped
        self.progress = [Progress() for _ in stages]
        self.lateness = [Lateness() for _ in stages]
        self.measured = 0                     # transfers k < measured are measured
        self.record: Record | None = None
        self.finish = 0                       # completion time of the last measured transfer
        self.trace = trace                    # tests: (sub-stream, k, start, end) per transfer

    async def run(self, end: int) -> None:
        """Every sub-stream's transfers up to frame `end` (exclusive)."""
        try:
            async with asyncio.TaskGroup() as group:
                for stage in self.stages:
                    group.create_task(self.sub_stream(stage, end))
        except BaseExceptionGroup as eg:
            first = eg.exceptions[0]
            raise first if isinstance(first, (Stopped, TestError)) else eg from None

    async def sub_stream(self, stage: Stage, end: int) -> None:
        i, progress, lateness = stage.index, self.progress, self.lateness[stage.index]
        kind, track, slots = stage.op.kind, stage.op.track, self.frames.slots
        clock, pacer, move = self.clock, self.pacer, self.tracks.move
        early, late = stage.stage - stage.lead, stage.stage + 1
        k = progress[i].done
        while k < end:
            if self.stopped():
                raise Stopped
            for other, offset in stage.gates:
                if progress[other].done < k + offset:          # no coroutine when already met
                    await progress[other].reach(k + offset)
            release = pacer.release(k + early)
            if clock() < release:
                await self.sleep_until(release)
            frame = self.frames.prepare(stage, k)
            t0 = clock()
            t1 = await move(kind, track, k % slots, frame)
            if kind == READ:
                self.frames.received(stage, k, frame)
            if k < self.measured:
                lateness.add(t1 - pacer.release(k + late))
                self.record(t1 - t0, t1)
                if t1 > self.finish:
                    self.finish = t1
            if self.trace is not None:
                self.trace.append((i, k, t0, t1))
            progress[i].advance()
            k += 1

    def done(self) -> int:
        """Frames every sub-stream has completed."""
        return min(p.done for p in self.progress)
