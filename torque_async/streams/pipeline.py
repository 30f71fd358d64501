"""The stream engine: every sub-stream of one stream as a coroutine, paced, gated, measured.

Transfer k of a sub-stream waits for its gates (schedule.py), then for its release time, then
moves its frame; one transfer of a sub-stream is in flight at a time. Its lateness is its
completion time (which the tracks' move returns) minus its deadline, 0 when on time; it is late
when that exceeds the tolerance (-lateUs). With `drop` (-dropLate) a frame whose deadline
passed a whole period ago when it could start is skipped, never moved, and counted dropped, as
a live display does; so is frame k of a sub-stream whose input frame k was dropped. Time comes
from the injected `clock` and `sleep_until` (and the tracks), so the same engine runs on the
precise timer or on a virtual clock in tests.
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from torque_async.kind_api.api import TestError

from ..io.engine_api import YIELD_NS
from ..meter import NEVER
from ..stats import Summary
from .frames import Frames
from .schedule import READ, Pacer, Stage


class Stopped(Exception):
    """The run was stopped (another test failed, or an interrupt)."""


SLICE_NS = 100_000_000              # a stream's waits look at the stop flag at least this often


async def wait_until(at: int, clock: Callable[[], int], sleep_until: Callable[[int], Awaitable],
                     stopped: Callable[[], bool]) -> bool:
    """Sleep until `at` (clock's ns) in slices of SLICE_NS that look at the stop flag; False
    when a stop came first: a long period is never slept on past a signal, which would let
    the loop's end cancel the stream before it publishes."""
    while (t := clock()) < at:
        if stopped():
            return False
        await sleep_until(min(at, t + SLICE_NS))
    return True


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

    def release(self) -> None:
        """Wake every waiter, reached or not (the pipeline winds down: each looks at `ending`)."""
        waiters, self.waiters = self.waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_result(None)

    async def reach(self, count: int) -> None:
        """Wait until `count` transfers are done (called only when they are not yet)."""
        future = asyncio.get_running_loop().create_future()
        self.waiters.append((count, future))
        await future


class Lateness(Summary):
    """Lateness of one sub-stream's moved frames (0 when on time); the frames late beyond the
    tolerance (ns), those dropped, and the longest run of consecutive frames late or dropped."""
    __slots__ = ("tolerance", "late", "dropped", "run", "longest")

    def __init__(self, tolerance: int = 0):
        super().__init__()
        self.tolerance = tolerance
        self.late = self.dropped = self.run = self.longest = 0

    def add(self, ns: int) -> None:
        if ns > self.tolerance:
            self.late += 1
            self.missed()
        else:
            self.run = 0
        super().add(max(ns, 0))

    def drop(self) -> None:
        self.dropped += 1
        self.missed()

    def missed(self) -> None:
        self.run += 1
        self.longest = max(self.longest, self.run)


class Timeline:
    """A stream's lateness over time in at most `points` points: each the completion time of the
    last of a run of `every` measured transfers (completion order) and the greatest lateness
    among them."""
    __slots__ = ("every", "left", "worst", "last", "points")

    def __init__(self, transfers: int, points: int):
        self.every = self.left = max(1, -(-transfers // points))
        self.worst = self.last = 0
        self.points: list[tuple[int, int]] = []

    def add(self, t: int, ns: int) -> None:
        self.worst, self.last = max(self.worst, ns), t
        self.left -= 1
        if not self.left:
            self.flush()

    def flush(self) -> None:
        """The run so far as a point (publish: the last, shorter run)."""
        if self.left < self.every:
            self.points.append((self.last, self.worst))
            self.left, self.worst = self.every, 0


Record = Callable[[int, int], None]           # (latency, end time) of one measured transfer


class Pipeline:
    def __init__(self, stages: tuple[Stage, ...], pacer: Pacer, tracks, frames: Frames,
                 clock: Callable[[], int], sleep_until: Callable[[int], Awaitable],
                 stopped: Callable[[], bool], trace: list | None = None,
                 tolerance: int = 0, drop: bool = False):
        self.stages, self.pacer, self.tracks, self.frames = stages, pacer, tracks, frames
        self.clock, self.sleep_until, self.stopped = clock, sleep_until, stopped
        self.drop = drop
        self.progress = [Progress() for _ in stages]
        self.lateness = [Lateness(tolerance) for _ in stages]
        self.measured = 0                     # transfers k < measured are measured
        self.timeline: Timeline | None = None  # set with measured
        self.record: Record | None = None
        self.finish = 0                       # completion time of the last measured transfer
        self.last = [0] * len(stages)         # each sub-stream's, 0 before its first
        self.moved = 0                        # transfers made (not the frames dropped)
        self.ending: Callable[[], bool] = lambda: False    # -slow's extra frames: True once no
                                              # other test measures (each sub-stream then ends
                                              # at its next wait, none cut in mid-transfer)
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
        k, turn = progress[i].done, clock()
        halted = lambda: self.stopped() or self.ending()              # noqa: E731
        while k < end:
            if self.stopped():
                raise Stopped
            for other, offset in stage.gates:
                if progress[other].done < k + offset and not self.ending():
                    await progress[other].reach(k + offset)      # (no coroutine when met)
            release, t = pacer.release(k + early), clock()
            if self.ending() or t < release and not await wait_until(
                    release, clock, self.sleep_until, halted):
                if self.stopped():
                    raise Stopped
                for p in progress:         # winding down: whoever waits for a gate looks too
                    p.release()
                return
            if t < release:
                turn = clock()
            elif t - turn > YIELD_NS:      # behind, it never sleeps, and a memory move never
                await asyncio.sleep(0)     # waits: the loop's turn (signals, the watchdog, the
                turn = clock()             # other tests) at least this often
            if self.skips(stage, k):
                self.frames.dropped[i].add(k)
                if k < self.measured:
                    lateness.drop()
                progress[i].advance()
                k += 1
                continue
            frame = self.frames.prepare(stage, k)
            t0 = clock()
            try:
                t1 = await move(kind, track, k % slots, frame)
            except OSError as e:           # named, not an ExceptionGroup of the TaskGroup's
                raise TestError(f"{stage.op.kind} of frame {k} (track {track}, slot {k % slots}) "
                                f"in {self.tracks.where}: {e.strerror or e}") from None
            self.moved += 1
            if kind == READ:
                self.frames.received(stage, k, frame)
            if k < self.measured:
                deadline = pacer.release(k + late)
                ns = max(0, t1 - deadline)
                lateness.add(ns)
                self.timeline.add(t1, ns)
                self.record(t1 - t0, t1)
                if t1 > self.finish:
                    self.finish = t1
                self.last[i] = t1             # (its frames complete in order)
            if self.trace is not None:
                self.trace.append((i, k, t0, t1))
            progress[i].advance()
            k += 1

    def window(self, stage: Stage, by: int = NEVER) -> int:
        """ns a sub-stream's measured frames span: from its first frame's period (released at
        pacer.release(stage), lookahead or not) to the later of its last due frame's deadline
        and its last completion (at most `by`: a stop's time), so a sub-stream that held reads
        exactly its rate (N frames over N periods), and one late at its end or that dropped
        frames reads below it."""
        lateness, release = self.lateness[stage.index].settle(), self.pacer.release
        due = lateness.count + lateness.dropped
        end = min(by, max(release(stage.stage + due), self.last[stage.index]))
        return max(0, end - release(stage.stage))

    def end(self) -> int:
        """When the measured frames' time ends: the latest sub-stream's end of window()."""
        return max(self.pacer.release(stage.stage) + self.window(stage) for stage in self.stages)

    def skips(self, stage: Stage, k: int) -> bool:
        """-dropLate: frame k is a whole period past its deadline, or an input of it was dropped."""
        if not self.drop:
            return False
        dropped = self.frames.dropped
        return (any(k in dropped[d] for d in stage.op.deps)
                or self.clock() >= self.pacer.release(k + stage.stage + 2))

    def done(self) -> int:
        """Frames every sub-stream has completed."""
        return min(p.done for p in self.progress)
