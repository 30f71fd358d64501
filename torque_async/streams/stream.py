"""-streams and -memStreams: one test process runs one stream (all its sub-streams) on the loop.

Set-up (untimed) allocates the frames and the tracks (memory, or a file: the -f file of this
process, chosen as the file tests choose it (io.actions.list_index), or a scratch file) and fills the tracks that are read before they are
written with source frames (not a user's file: that is read as it is). `run` waits startTime,
then runs the pipeline on the precise timer for runTime worth of frames. The measured interval
runs from the first frame's release to the end of its frames' periods (Pipeline.end: the
latest sub-stream's window), which it waits out, or to a stop that came first (never a time
that has not come yet): a stream that held reports its rate, one that runs late less. The row
reports the combined bytes of the sub-streams, and each sub-stream's transfers, lateness,
dropped frames and window in the stream fields.

A stream that writes publishes itself for streams wired to it (-from, wire.py); a wired stream
finds its writer at set-up, starts its frames one period behind the writer's stage and reads
its first sub-stream's frames from the writer's tracks.
"""
from __future__ import annotations

import asyncio
import math
import os

import numpy as np
import psutil

from torque_async.kind_api.api import VALUES, TestContext, TestError
from torque_async.kind_api.buffers import Buffers

from ..errors import UsageError
from ..io.actions import file_size, list_index
from ..io.plancheck import check_path
from ..io.scratch import IN_FLIGHT
from ..meter import Meter, now
from ..results import MAX_SAMPLES, UPSTREAM_FIELDS
from ..timer import PreciseTimer
from ..units import KB, MB, NS_PER_S
from .frames import CHECK_FRAMES, HEADER, WRITTEN, Frames, header_of
from .pipeline import Pipeline, Progress, Stopped, Timeline, wait_until
from .schedule import READ, WRITE, Geometry, Pacer, frames_text
from .tracks import FileTracks, MemoryTracks
from .wire import Borrowed, Wire, borrows, check as check_wire, publish, withdraw, writer_of

EXTRA_CHUNK = 100_000_000           # ns of frames run at a time while -slow keeps a stream going


class StreamTest:
    memory = False
    proves, unproved = VALUES, ("its check reads back the last frames each write left in its "
                                "track, not every frame")

    def __init__(self, ctx: TestContext):
        self.ctx = ctx
        self.geometry = g = Geometry.of(ctx.group.args, ctx.local)
        self.stages = g.stages()
        self.transfer_bytes = g.size
        self.system_bytes = g.size * (2 if self.memory else 1)    # a memory copy reads + writes
        self.buffers = Buffers(ctx.local.wire)
        self.tracks = self.frames = self.timer = self.pipeline = None
        self.trace: list | None = None
        self.info = ""
        self.writer = writer_of(g.label)                   # its writing sub-stream (-1: none)
        self.output = Progress() if self.writer >= 0 else None     # shared with readers
        self.wire: Wire | None = None                      # -from: what it reads
        self.begun = 0                         # its first frame's period's start, once run

    def open_tracks(self):
        g = self.geometry
        if self.memory:
            return MemoryTracks(self.buffers, g.tracks, g.slots, g.size)
        ctx, files = self.ctx, self.ctx.settings.files
        path = files[list_index(ctx.group, ctx.proc, ctx.row)] if files else None
        writes = any(stage.op.kind == WRITE for stage in self.stages)
        return FileTracks(path, g.tracks, g.slots, g.size, ctx.local, ctx.row,
                          ctx.settings.engine, writes, ctx.settings.writeDevices, ctx.pins)

    async def setup(self) -> None:
        g, ctx = self.geometry, self.ctx
        if ctx.local.from_group is not None:
            self.wire = Wire.to(ctx.local.from_group, ctx.proc, g.period)
        own = not borrows(ctx.group)                         # a wired r reads only its writer's
        self.tracks = self.open_tracks() if own else Borrowed(self.wire.tracks)
        sourced = own and (self.memory or self.tracks.scratch)
        self.frames = Frames(g, self.stages, self.buffers, ctx.rng, sourced,
                             self.wire and self.wire.frames)
        if self.output is not None:
            publish(ctx.group.index, ctx.proc, self)
        if sourced:
            await self.fill()
            await self.tracks.flush()
        self.timer = PreciseTimer.shared()
        local = self.ctx.local
        wire = self.wire
        lines = [f"{g.label}: {len(self.stages)} x {g.frames} {frames_text(g, local)}",
                 *([f"{g.slots} frames per track in {self.tracks.where}"[:100]] if own else []),
                 *([f"{self.stages[0].name}: reads group {wire.group}'s frames (-from "
                    f"{wire.group}), {wire.slots} frames per track,",
                    f"in {wire.tracks.where}"[:100]] if wire else [])]
        info = "\n".join(lines)
        self.info = f"{info}\n{self.tracks.note}" if self.tracks.note else info

    async def fill(self) -> None:
        """The source tracks' frames, written IN_FLIGHT at once (each lane a frame buffer of its
        own); a failure or a cancel ends every lane before it goes on."""
        places = [(track, slot) for track in self.frames.source_tracks()
                  for slot in range(self.geometry.slots)]

        async def lane(frame: np.ndarray, mine: list[tuple[int, int]]) -> None:
            for track, slot in mine:
                self.frames.source_frame(frame, track, slot)
                await self.tracks.move(WRITE, track, slot, frame)
        n = min(IN_FLIGHT, len(places))
        lanes = [asyncio.ensure_future(lane(self.buffers.new(self.geometry.size), places[i::n]))
                 for i in range(n)]
        try:
            await asyncio.gather(*lanes)
        except BaseException:
            for task in lanes:
                task.cancel()
            await asyncio.wait(lanes)
            raise

    async def run(self, meter: Meter) -> None:
        g = self.geometry
        if not self.memory:
            meter.row["file"] = os.fsencode(self.tracks.path)[:256]
        stopped = lambda: meter.stopped                             # noqa: E731
        at = now() + self.lag
        await self.until(at, stopped)
        up = self.wire and self.wire.writer
        if up and up.begun:                # wired: from its writer's start, not its own wake-up
            at = up.begun - up.lag + self.lag     # (which the loop may run late): exactly one
            await self.until(at, stopped)         # period behind the writer's schedule
            start = self.begun = meter.begin(min(at, now()))
        else:
            start = self.begun = meter.begin()
        local = self.ctx.local
        pipe = self.pipeline = Pipeline(self.stages, Pacer(start, g.period), self.tracks,
                                        self.frames, now, self.timer.sleep_until, stopped,
                                        self.trace, local.lateUs * 1000, local.dropLate,
                                        local.bufferFrames or 0, self.wire, self.output)
        pipe.measured, pipe.record = g.frames, meter.record
        pipe.timeline = Timeline(g.frames * len(self.stages), MAX_SAMPLES)
        try:
            await pipe.run(g.frames)
            chunk = max(1, math.ceil(EXTRA_CHUNK / g.period))
            end = pipe.end()               # its frames' periods: a held stream's rate is its
            whole = await self.until(end, stopped)     # target, as each sub-stream's (window);
            meter.end(min(end, now()))                 # a stop in the wait cuts it short
            if meter.every:                    # the samples end at the last completion, as
                meter.stamp(pipe.finish)       # their intervals count completions
            self.publish(meter, whole)
            pipe.ending = lambda: not meter.keep_going()      # -slow: the others' end ends the
            while meter.keep_going() and not pipe.cut:       # wait for a next frame too
                await pipe.run(pipe.done() + chunk)
        except Stopped:
            if meter.finish == 0:
                meter.end(min(pipe.end(), now()))
                self.publish(meter, False)
        finally:
            if self.output is not None:          # its readers wait for no more frames
                self.output.closed = True
                self.output.release()
        meter.publish_extra(pipe.moved - meter.count)      # (not the frames -dropLate skipped)

    @property
    def lag(self) -> int:
        """ns from the run's start to its first frame's period: its startTime, and its wire's
        delay (one period behind its writer's stage)."""
        return self.geometry.start_delay + (self.wire.delay if self.wire else 0)

    async def until(self, at: int, stopped) -> bool:
        """Wait on the precise timer until monotonic ns `at` (wait_until: False when a stop
        came first)."""
        return await wait_until(at, now, self.timer.sleep_until, stopped)

    def publish(self, meter: Meter, whole: bool) -> None:
        """The measured figures (`whole`: every frame measured, not stopped first)."""
        meter.publish(self.transfer_bytes, self.system_bytes, whole=whole)
        row = meter.row
        row["nsubs"] = len(self.stages)
        for i, s in enumerate(self.pipeline.lateness):
            s.settle()
            row["sub_xfers"][0, i], row["late"][0, i], row["late_run"][0, i] = \
                s.count, s.late, s.longest
            row["dropped"][0, i], row["late_buffered"][0, i] = s.dropped, s.buffered
            row["sub_ns"][0, i] = self.pipeline.window(self.stages[i], meter.finish)
            row["late_min"][0, i], row["late_max"][0, i], row["late_sum"][0, i] = \
                s.lo, s.hi, s.total
            row["late_hist"][0, i] = s.hist
            for name in UPSTREAM_FIELDS:                 # a wired stream's inherited
                row[name][0, i] = getattr(s, name)
        timeline = self.pipeline.timeline
        timeline.flush()
        row["nlate_trace"] = n = len(timeline.points)
        row["late_trace"][0, :n] = np.reshape(timeline.points, (n, 2))

    async def check(self) -> None:
        """Compare the last frames each write left in its track with what they must hold."""
        pipe, g, frames = self.pipeline, self.geometry, self.frames
        loaded = [self.buffers.new(g.size) for _ in range(3)]
        for writer in (s for s in self.stages if s.op.kind == WRITE):
            deps = writer.op.deps if len(writer.op.deps) == 2 else ()     # combined inputs
            tracks = [writer.op.track, *(self.stages[d].op.track for d in deps)]
            written = pipe.progress[writer.index].done
            for k in range(max(0, written - min(g.slots, CHECK_FRAMES)), written):
                if k in frames.dropped[writer.index]:      # its slot holds an earlier frame
                    continue
                slot = k % g.slots
                for track, buf in zip(tracks, loaded):
                    await self.tracks.move(READ, track, slot, buf)
                inputs = loaded[1:]
                if self.wire and deps:               # input 0 is the writer's frame k
                    inputs = [self.wire.frames.output(k), inputs[1]]
                got = loaded[0]
                want = None if inputs and inputs[0] is None else frames.body(writer, k, inputs)
                if header_of(got) != (WRITTEN | writer.op.track, k) or \
                        (want is not None and not np.array_equal(got, want)):
                    tag, number = header_of(got)
                    raise TestError(f"stream {writer.name}: slot {slot} holds frame "
                                    f"{tag:#x}/{number}, not the frame {k} it wrote"
                                    + (" (same header, other data)" if number == k else ""))

    async def close(self) -> None:
        withdraw(self.ctx.group.index, self.ctx.proc, self)
        if self.tracks is not None:
            await self.tracks.forget()
        for part in (self.timer, self.tracks, self.buffers):
            if part is not None:
                part.close()


class MemStreamTest(StreamTest):
    memory = True


def check_group(plan, group) -> None:
    """Usage errors of a -streams/-memStreams group that no single argument shows."""
    name = f"-{group.action} {group.args[0]}"
    try:
        g = Geometry.of(group.args, group.local)
    except ValueError as e:
        raise UsageError(f"{name}: {e}") from None
    if g.size < HEADER:                # every frame carries its track and number (frames.py)
        raise UsageError(f"{name}: frames of {g.size} bytes; a stream's frame starts with a "
                         f"{HEADER}-byte header (its track and number): make it at least "
                         f"{HEADER} bytes")
    check_wire(plan, group)
    run = group.args[5]
    if g.period > run * NS_PER_S:      # one frame, paced over its whole period: -memStreams r
        raise UsageError(              # (else a tiny rate paces one frame for ages)
            f"{name}: a frame every {float(g.period) / NS_PER_S:.6g} s does not fit in its "
            f"runTime of {run:g} s (a stream runs whole frames, one a period): raise its rate "
            f"(bwMBs, or -fps) or runTime, or make the frames smaller")
    if g.mfile_slots < 1:
        frame = (f"-frame {group.local.frame[0]}x{group.local.frame[1]} frame of {g.size} bytes"
                 if group.local.frame else f"transfer of {g.size // KB} KB")
        raise UsageError(f"{name}: mfile {group.args[6]} MB holds no {frame}")
    own = not borrows(group)
    need = g.tracks * g.track_bytes if own else 0
    if group.action == "memStreams":
        need += (2 * g.lookahead + 6) * g.size             # frame buffers, at most
        have = psutil.virtual_memory().available
        if need * group.local.p > have * 0.9:
            raise UsageError(f"{name}: {group.local.p} x {need // MB} MB of stream memory, "
                             f"{have // MB} MB available: lower mfile or the process count")
        return
    files = plan.settings.files
    if not files or not own:
        return
    reads_first = any(s.op.kind == READ and not s.op.deps and
                      (s.index or group.local.from_group is None) for s in g.stages())
    for proc in (p for p in plan.procs() if p.group is group):
        index = list_index(group, proc.index, proc.row)
        if index >= len(files):
            raise UsageError(f"{name}: process {proc.index} needs file number {index} of the -f "
                             f"list, which has {len(files)}")
        path = files[index]
        check_path(plan.settings, name, path, any(s.op.kind != READ for s in g.stages()))
        try:
            have = file_size(path)                     # a block device's too (its st_size: 0)
        except ValueError as e:
            raise UsageError(f"{name}: {e}") from None
        if reads_first and have < need:
            raise UsageError(f"{name}: {path} holds {have // MB} MB; the stream reads "
                             f"{need // MB} MB of it (only scratch files are filled for it)")


def measured_transfers(group) -> int:
    """Transfers one process of a stream group measures: every sub-stream's frames."""
    g = Geometry.of(group.args)
    return g.frames * len(g.stages())
