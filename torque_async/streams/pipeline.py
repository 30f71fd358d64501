"""The stream engine: every sub-stream of one stream as a coroutine, paced, gated, measured.

Transfer k of a sub-stream waits for its gates (schedule.py), then for its release time, then
moves its frame; one transfer of a sub-stream is in flight at a time. Its lateness is its
completion time (which the tracks' move returns) minus its deadline, 0 when on time; it is late
when that exceeds the tolerance (-lateUs), and lost when it exceeds the tolerance plus the
buffer's N periods (-bufferFrames N: frame k is lost when it completes after frame k + N's
deadline, the N frames behind it having come and filled the buffer; with N = 0 every late
frame is lost). A stream misses on lost frames; the late frames its buffer held are counted
apart. With `drop` (-dropLate) a frame whose deadline passed a whole period ago (plus the
buffer's N periods) when it could start is skipped, never moved, and counted dropped, as a
live display does; so is frame k of a sub-stream whose input frame k was dropped (whatever
-dropLate: it never came). Time comes from the injected `clock` and `sleep_until` (and the
tracks), so the same engine runs on the precise timer or on a virtual clock in tests.

A wired stream (-from, wire.py) reads its first sub-stream's frames from its writer's tracks,
frame k once the writer completed it. Its own lateness is what a frame would have had with a
writer that held (frame k there at the start of the reader's period for it, the writer's
deadline): each transfer's `alone` start is the latest of that, its release, its own previous
frame's `alone` completion and those of the transfers its gates wait for (its inputs, and the
frames of its own that free its ring or slot: a wait on its own slow write is its own), plus
its own delay (from its release, or when what it last waited for came, to its start: a late
wake-up, the loop's turn), and its `alone` completion that plus the time the transfer really
took. The rest of its lateness is inherited from the upstream. The figures (late, late within
buffer, lateness) are its own; Lateness counts the inherited apart. A frame lost or dropped
only through the inherited part is the upstream's.
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
    """Transfers one sub-stream has completed (and begun: `started`); others wait for it to
    reach a count. `closed`: it will complete no more (a wired writer's run ended)."""
    __slots__ = ("done", "started", "closed", "waiters")

    def __init__(self):
        self.done = self.started = 0
        self.closed = False
        self.waiters: list[tuple[int, asyncio.Future]] = []

    def advance(self, t: int) -> None:
        """One more transfer done, at time t (the waiters it reaches are told t)."""
        self.done += 1
        if self.waiters:
            due = [w for w in self.waiters if w[0] <= self.done]
            self.waiters = [w for w in self.waiters if w[0] > self.done]
            for _, future in due:
                future.set_result(t)

    def release(self) -> None:
        """Wake every waiter, reached or not (the pipeline winds down: each looks at `ending`)."""
        waiters, self.waiters = self.waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_result(None)

    async def reach(self, count: int, timeout: float | None = None) -> int | None:
        """Wait until `count` transfers are done (called only when they are not yet), or at
        most `timeout` s; when the count was reached (None: a timeout or a wind-down), which
        is earlier than this wait's end when the loop ran something else first."""
        future = asyncio.get_running_loop().create_future()
        self.waiters.append((count, future))
        if timeout is None:
            return await future
        await asyncio.wait([future], timeout=timeout)
        return future.result() if future.done() else None


class Lateness(Summary):
    """Lateness of one sub-stream's moved frames (0 when on time), its own: the frames lost
    (`late`: late beyond the tolerance (ns) and the buffer's allowance, or overwritten by their
    writer before they were read: `lapped`), those late within the buffer (`buffered`), those
    dropped, and the longest run of consecutive frames lost or dropped. A wired stream's
    inherited lateness apart: frames late beyond the tolerance by it (`up_late`), lost or
    dropped by it alone (`up_lost`), and the greatest (`up_max`, ns)."""
    __slots__ = ("tolerance", "late", "buffered", "dropped", "run", "longest", "lapped",
                 "up_late", "up_lost", "up_max")

    def __init__(self, tolerance: int = 0):
        super().__init__()
        self.tolerance = tolerance
        self.late = self.buffered = self.dropped = self.run = self.longest = 0
        self.lapped = self.up_late = self.up_lost = self.up_max = 0

    def add(self, ns: int, allowance: int = 0, inherited: int = 0, lapped: bool = False) -> None:
        """A frame `ns` late, its buffer holding it `allowance` ns more (N periods), `inherited`
        ns of it the upstream's; `lapped`: its writer overwrote it (lost)."""
        own, limit = ns - inherited, self.tolerance + allowance
        if own > limit or lapped:
            self.late += 1
            self.lapped += lapped
            self.missed()
        else:
            self.buffered += own > self.tolerance
            self.up_lost += ns > limit
            self.run = 0
        self.up_late += inherited > self.tolerance
        self.up_max = max(self.up_max, inherited)
        super().add(max(own, 0))

    def drop(self, inherited: bool = False) -> None:
        """A frame skipped; `inherited`: for the upstream's lateness or drop."""
        if inherited:
            self.up_lost += 1
            return
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


OWN, UPSTREAM = "own", "upstream"          # whose a dropped frame is

Record = Callable[[int, int], None]           # (latency, end time) of one measured transfer


class Pipeline:
    def __init__(self, stages: tuple[Stage, ...], pacer: Pacer, tracks, frames: Frames,
                 clock: Callable[[], int], sleep_until: Callable[[int], Awaitable],
                 stopped: Callable[[], bool], trace: list | None = None,
                 tolerance: int = 0, drop: bool = False, buffer: int = 0,
                 wire=None, output: Progress | None = None):
        self.stages, self.pacer, self.tracks, self.frames = stages, pacer, tracks, frames
        self.clock, self.sleep_until, self.stopped = clock, sleep_until, stopped
        self.drop, self.buffer = drop, buffer       # -dropLate, -bufferFrames
        self.progress = [Progress() for _ in stages]
        self.wire = wire                      # -from: what sub-stream 0 reads (wire.Wire)
        for stage in stages:                  # the writer's, shared with the streams wired to
            if output is not None and stage.op.kind != READ:     # it
                self.progress[stage.index] = output
        self.alone = [0] * len(stages)        # a wired stream's: each sub-stream's last
        self.alone_at: list[dict[int, int]] = [{} for _ in stages]   # `alone` completion, and
                                              # recent frames' (for the sub-streams gated on it)
        self.kept = 2 * (frames.slots + max(s.lead for s in stages)) + 4     # frames of them
        self.inherited: list[set[int]] = [set() for _ in stages]  # frames dropped upstream's
        self.cut = False                      # the wired writer ended: no frame comes
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

    def ending_now(self) -> bool:
        """The pipeline winds down: -slow's end, or its wired writer ended."""
        return self.cut or self.ending()

    def wind_down(self) -> None:
        for p in self.progress:            # whoever waits for a gate looks too
            p.release()

    async def sub_stream(self, stage: Stage, end: int) -> None:
        i, progress, lateness = stage.index, self.progress, self.lateness[stage.index]
        wired = self.wire is not None and i == 0
        kind, track, slots = stage.op.kind, stage.op.track, self.frames.slots
        tracks = self.tracks
        if wired:
            tracks, track, slots = self.wire.tracks, self.wire.track, self.wire.slots
        clock, pacer, move = self.clock, self.pacer, tracks.move
        early, late = stage.stage - stage.lead, stage.stage + 1
        k, turn = progress[i].done, clock()
        halted = lambda: self.stopped() or self.ending_now()          # noqa: E731
        while k < end:
            if self.stopped():
                raise Stopped
            ready = clock() if self.wire is not None else 0     # (wired: when its last wait
            for other, offset in stage.gates:                   # ended, below)
                if progress[other].done < k + offset and not self.ending_now():
                    opened = await progress[other].reach(k + offset)    # (no coroutine when
                    ready = max(ready, opened or 0)                     # met)
            release, t = pacer.release(k + early), clock()
            if self.ending_now() or t < release and not await wait_until(
                    release, clock, self.sleep_until, halted):
                if self.stopped():
                    raise Stopped
                self.wind_down()
                return
            alone = None                   # when it would start with a writer that held
            if self.wire is not None:
                alone = max(release, pacer.release(k + stage.stage) if wired else 0,
                            self.alone[i], *(self.alone_at[other].get(k + offset - 1, 0)
                                             for other, offset in stage.gates))
                if wired and self.wire.progress.done <= k:
                    came = await self.upstream(k)
                    if came is None:
                        self.wind_down()
                        return
                    ready = max(ready, came)
                ready = max(ready, release)    # from here to its start: its own delay
            if t < release:
                turn = clock()
            elif t - turn > YIELD_NS:      # behind, it never sleeps, and a memory move never
                await asyncio.sleep(0)     # waits: the loop's turn (signals, the watchdog, the
                turn = clock()             # other tests) at least this often
            if why := self.skips(stage, k, None if alone is None else
                                 alone + max(0, clock() - ready)):
                self.frames.dropped[i].add(k)
                if why == UPSTREAM:
                    self.inherited[i].add(k)
                if k < self.measured:
                    lateness.drop(why == UPSTREAM)
                progress[i].advance(clock())
                k += 1
                continue
            frame = self.frames.prepare(stage, k)
            t0 = clock()
            progress[i].started = k + 1
            try:
                t1 = await move(kind, track, k % slots, frame)
            except OSError as e:           # named, not an ExceptionGroup of the TaskGroup's
                raise TestError(f"{stage.op.kind} of frame {k} (track {track}, slot {k % slots}) "
                                f"in {tracks.where}: {e.strerror or e}") from None
            self.moved += 1
            lapped = False
            if wired:
                lapped = self.wire.received(stage, k, frame)
                if lapped:
                    self.frames.lapped.add(k)
            elif kind == READ:
                self.frames.received(stage, k, frame)
            inherited = 0
            if alone is not None:
                alone += t1 - ready            # its own delay and its transfer's time
                self.alone[i] = self.alone_at[i][k] = alone
                self.alone_at[i].pop(k - self.kept, None)
            if k < self.measured:
                deadline = pacer.release(k + late)
                ns = max(0, t1 - deadline)
                if alone is not None:
                    inherited = ns - max(0, min(ns, alone - deadline))
                lateness.add(ns, pacer.release(k + late + self.buffer) - deadline, inherited,
                             lapped)
                self.timeline.add(t1, ns)
                self.record(t1 - t0, t1)
                if t1 > self.finish:
                    self.finish = t1
                self.last[i] = t1             # (its frames complete in order)
            if self.trace is not None:
                self.trace.append((i, k, t0, t1))
            progress[i].advance(t1)
            k += 1

    async def upstream(self, k: int) -> int | None:
        """Wait until the wired writer completed frame k: when it did (None: the pipeline
        winds down, or the writer ended first)."""
        written, came = self.wire.progress, None
        while written.done <= k:
            if self.stopped():
                raise Stopped
            if self.ending_now() or written.closed:
                self.cut = self.cut or written.closed
                return None
            came = await written.reach(k + 1, SLICE_NS / 1e9)
        return came or self.clock()

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

    def skips(self, stage: Stage, k: int, alone: int | None = None) -> str:
        """Whether frame k is skipped, and whose the drop is (OWN, UPSTREAM; '': moved): an
        input of it was dropped (whoever's that was), the wired writer dropped it, or with
        -dropLate it is a whole period past its deadline (its buffer's N periods after it:
        until then the buffer holds it), the upstream's when it would not be at its `alone`
        start (a wired stream's)."""
        dropped = self.frames.dropped
        inputs = [d for d in stage.op.deps if k in dropped[d]]
        if inputs:
            return UPSTREAM if any(k in self.inherited[d] for d in inputs) else OWN
        if self.wire is not None and stage.index == 0 and k in self.wire.dropped:
            return UPSTREAM
        if not self.drop:
            return ""
        due, t = self.pacer.release(k + stage.stage + 2 + self.buffer), self.clock()
        if t < due:
            return ""
        return UPSTREAM if alone is not None and alone < due else OWN

    def done(self) -> int:
        """Frames every sub-stream has completed."""
        return min(p.done for p in self.progress)
