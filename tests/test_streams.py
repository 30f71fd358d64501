"""The stream engine in-process: exact pacing on a virtual clock, every label's ordering and
data, the lookahead bound, slot reuse, lateness, and the checks that catch broken data."""
from __future__ import annotations

import asyncio
import itertools
import math
import os
from fractions import Fraction

import numpy as np
import pytest

from torque_async import cmdline
from torque_async.io import scratch
from torque_async.meter import Meter
from torque_async.results import Results, segment_name
from torque_async.streams.frames import SOURCE, WRITTEN, Frames, header_of, stamp
from torque_async.streams.pipeline import SLICE_NS, Lateness, Pipeline, Stopped, Timeline
from torque_async.streams.schedule import LABELS, READ, WRITE, Geometry, Pacer, stages
from torque_async.streams.stream import MemStreamTest, StreamTest
from torque_async.streams import tracks as tracks_module
from torque_async.streams.tracks import MemoryTracks
from torque_async.units import KB, MB
from torque_async.kind_api.api import TestContext as Context      # not Test*: pytest would collect it
from torque_async.kind_api.api import TestError as Failure
from torque_async.kind_api.buffers import Buffers

KEYS = itertools.count(0x7A100)


def build(args: str, *extra: str, row: int = 0):
    """The stream test of `[extra] -memStreams|-streams ARGS` (test process `row` of the plan)
    as the loop side builds it."""
    plan = cmdline.parse([*extra, *args.split()])
    proc = plan.procs()[row]
    ctx = Context(proc.group, proc.index, proc.row, np.random.default_rng(7), 64, plan.settings)
    return (MemStreamTest if proc.group.action == "memStreams" else StreamTest)(ctx)


def run_stream(test, wrap=None) -> tuple[Results, list]:
    """setup, run (tracing every transfer) and check one stream test on its own results row."""
    results = Results.create(segment_name(next(KEYS)), 1)
    test.trace = []

    async def go():
        await test.setup()
        if wrap:
            test.tracks = wrap(test.tracks)
        try:
            await test.run(Meter(results, 0, None, slow=False))
            await test.check()
        finally:
            await test.close()
    try:
        asyncio.run(go())
    finally:
        results.shm.unlink()
    return results, test.trace


def by_op(trace) -> dict[int, dict[int, tuple[int, int]]]:
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for i, k, t0, t1 in trace:
        out.setdefault(i, {})[k] = (t0, t1)
    return out


def done_by(ops, j: int, t: int) -> int:
    """Transfers sub-stream j had completed at time t."""
    return sum(1 for t0, t1 in ops[j].values() if t1 <= t)


# Pacing on a virtual clock -------------------------------------------------------------------

class VirtualTime:
    """A clock that only moves when someone sleeps or a transfer takes time."""

    def __init__(self, t: int = 0):
        self.t = t

    def __call__(self) -> int:
        return self.t

    async def sleep_until(self, t: int) -> None:
        assert t > self.t, "slept for a time already past"
        self.t = t


class TimedTracks:
    """Memory tracks whose transfer k of each sub-stream takes durations(k) virtual ns."""

    def __init__(self, tracks, clock: VirtualTime, durations):
        self.tracks, self.clock, self.durations, self.k = tracks, clock, durations, 0

    async def move(self, kind, track, slot, frame):
        await self.tracks.move(kind, track, slot, frame)
        self.clock.t += self.durations(self.k)
        self.k += 1
        return self.clock.t


def virtual_pipeline(label: str, lookahead: int, size_kb: int, bw: float, run_s: float,
                     durations):
    g = Geometry.of((label, lookahead, size_kb, bw, 0.0, run_s, 64))
    st = g.stages()
    buffers = Buffers(False)
    clock = VirtualTime(10**12)
    tracks = TimedTracks(MemoryTracks(buffers, g.tracks, g.slots, g.size), clock, durations)
    frames = Frames(g, st, buffers, np.random.default_rng(1), sourced=False)
    trace: list = []
    pipe = Pipeline(st, Pacer(clock.t, g.period), tracks, frames, clock, clock.sleep_until,
                    lambda: False, trace)
    pipe.measured, pipe.record = g.frames, lambda latency, end: None
    pipe.timeline = Timeline(g.frames * len(st), 1024)
    return g, pipe, clock, trace


def test_pacing_keeps_exact_deadlines_over_100000_transfers_and_late_ones_do_not_shift_it():
    # The 1080p60 period (8 MB at 480 MB/s; here 8 KB frames at 0.46875 MB/s): 16 666 666.67 ns,
    # which no integer step accumulates without drift. Every 1000th transfer takes 2.5 periods:
    # it and the next one are late.
    period = Fraction(8 * KB * 10**9) / (Fraction("0.46875") * MB)
    long = int(2.5 * period)
    g, pipe, clock, trace = virtual_pipeline(
        "w", 0, 8, 0.46875, 1667.0, lambda k: long if k % 1000 == 999 else 1_000_000)
    start = clock.t
    assert g.frames == 100_020                      # ceil(1667 s / period)
    asyncio.run(pipe.run(g.frames))
    assert len(trace) == g.frames
    previous_end = 0
    for i, k, t0, t1 in trace:
        exact = start + math.floor(k * period)
        assert t0 == max(exact, previous_end), k  # starts on its release, or right after a late one
        previous_end = t1
    assert trace[-1][2] == start + math.floor((g.frames - 1) * period)
    lateness = pipe.lateness[0].settle()
    # transfer 999 of each 1000 ends 1.5 periods after its deadline, the next 0.5 period + 1 ms
    assert lateness.count == g.frames and lateness.late == 2 * (g.frames // 1000)
    assert lateness.longest == 2
    worst = max(t1 - (start + math.floor((k + 1) * period)) for _, k, _, t1 in trace)
    assert lateness.hi == worst and lateness.lo == 0 and abs(worst - 1.5 * period) <= 1


def test_latency_and_lateness_end_at_the_completion_time_the_transfer_reports():
    # each transfer takes 3 ms of a 1 ms period and reports that it completed 2.5 ms in, as a
    # transfer timed at its completion (the engine's) does before the loop resumes the sub-stream
    g, pipe, clock, trace = virtual_pipeline("w", 0, 64, 62.5, 0.01, lambda k: 3_000_000)
    inner = pipe.tracks.move

    async def move(*args):
        return await inner(*args) - 500_000
    pipe.tracks.move, latencies = move, []
    pipe.record = lambda latency, end: latencies.append(latency)
    asyncio.run(pipe.run(g.frames))
    assert latencies == [2_500_000] * g.frames == [t1 - t0 for _, _, t0, t1 in trace]
    assert pipe.lateness[0].settle().hi == trace[-1][3] - pipe.pacer.release(g.frames)


def test_a_prefetching_read_is_released_lookahead_periods_early():
    g, pipe, clock, trace = virtual_pipeline("r", 4, 1024, 100.0, 1.0, lambda k: 1000)
    start = clock.t
    asyncio.run(pipe.run(g.frames))
    starts = {k: t0 for _, k, t0, _ in trace}
    for k in range(5):                                   # frames 0..4 are read at once
        assert starts[k] == start + 1000 * k
    for k in range(5, g.frames):                         # then frame k at release(k - 4)
        assert starts[k] == start + (k - 4) * 10_000_000
    assert pipe.lateness[0].late == 0


@pytest.mark.parametrize("label, lookahead", [("w", 0), ("r", 4), ("rrw", 2)])
def test_each_sub_stream_that_held_spans_exactly_its_frames_periods(label, lookahead):
    """N frames that held read exactly the target rate: N periods, not the N - 1 from the first
    release to the last completion, nor the whole pipeline's N + stages - 1."""
    g, pipe, clock, trace = virtual_pipeline(label, lookahead, 64, 62.5, 0.05, lambda k: 1000)
    asyncio.run(pipe.run(g.frames))
    assert all(pipe.lateness[s.index].late == 0 for s in pipe.stages)
    for stage in pipe.stages:
        assert pipe.window(stage) == g.frames * 1_000_000 == g.frames * g.period
    last = max(stage.stage for stage in pipe.stages)     # the stream's: N + stages - 1 periods
    assert pipe.end() == pipe.pacer.release(g.frames + last)


def test_a_sub_stream_late_at_its_end_spans_to_its_last_completion():
    g, pipe, clock, trace = virtual_pipeline("w", 0, 64, 62.5, 0.05,
                                             lambda k: 3_500_000 if k == 49 else 1000)
    asyncio.run(pipe.run(g.frames))
    assert g.frames == 50 and pipe.lateness[0].late == 1
    last = trace[-1][3]
    assert last == pipe.pacer.release(49) + 3_500_000                 # 2.5 ms past its deadline
    assert pipe.window(pipe.stages[0]) == last - pipe.pacer.release(0) == 52_500_000


def test_a_stop_during_a_long_pacing_sleep_ends_the_stream_within_a_slice():
    """A 2 s period slept on past a signal (and, at 4 s, the loop's end cancelled the stream
    before it published anything)."""
    g, pipe, clock, trace = virtual_pipeline("r", 0, 1024, 0.5, 10.0, lambda k: 1000)
    start = clock.t
    pipe.stopped = lambda: clock.t >= start + 150_000_000       # a stop 150 ms in
    with pytest.raises(Stopped):
        asyncio.run(pipe.run(g.frames))
    assert [k for _, k, _, _ in trace] == [0]                   # frame 1 (due at 2 s) never moved
    assert clock.t - start <= 150_000_000 + SLICE_NS            # noticed within a slice
    assert pipe.end() - start == 2_000_000_000                  # frame 0's period, which
    assert pipe.window(pipe.stages[0], clock.t) == clock.t - start    # the stop cut short


def test_a_track_error_is_named_and_dropped_frames_are_not_counted_as_moved():
    """A file stream's short read failed as 'ExceptionGroup: unhandled errors in a TaskGroup',
    and -dropLate's skipped frames read as -slow's unmeasured transfers."""
    g, pipe, clock, trace = virtual_pipeline("r", 0, 64, 62.5, 0.05, lambda k: 1000)
    pipe.drop = True
    pipe.skips = lambda stage, k, alone: "own" if k % 5 == 4 else ""   # every fifth dropped
    asyncio.run(pipe.run(g.frames))
    assert pipe.moved == len(trace) == 40 and pipe.lateness[0].dropped == 10

    async def failing(kind, track, slot, frame):
        raise OSError(5, "Input/output error")
    g, pipe, clock, trace = virtual_pipeline("r", 0, 64, 62.5, 0.05, lambda k: 1000)
    pipe.tracks.move, pipe.tracks.where = failing, "/some/cam.dat"
    with pytest.raises(Failure, match=r"^r of frame 0 \(track 0, slot 0\) in /some/cam.dat: "
                                        r"Input/output error$"):
        asyncio.run(pipe.run(g.frames))


@pytest.mark.parametrize("label", ["r", "rrw", "wr", "rwr"])
def test_winding_down_ends_every_sub_stream_at_a_frame_boundary(label):
    """-slow's extra frames: once no other test measures, each sub-stream ends at its next wait
    (a 1 s period kept the run going to its next frame), none cut in mid-transfer, none left
    waiting for a gate, and a write never runs ahead of the reads it needs."""
    g, pipe, clock, trace = virtual_pipeline(label, 1, 64, 0.0625, 100.0, lambda k: 1000)
    start = clock.t
    pipe.ending = lambda: clock.t >= start + 3_500_000_000     # the others' end, at 3.5 s
    asyncio.run(pipe.run(g.frames))                           # returns: no Stopped, no hang
    assert clock.t - start <= 3_500_000_000 + SLICE_NS
    done = [p.done for p in pipe.progress]
    assert 3 <= max(done) <= 5 and len(trace) == sum(done)   # each frame moved is counted
    for stage in pipe.stages:
        for other, offset in stage.gates:
            if offset > 0:                                    # its inputs were all moved
                assert done[stage.index] + offset - 1 <= done[other]


def resident(buf: np.ndarray) -> int:
    """Pages of buf the kernel has in memory (mincore)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    page = os.sysconf("SC_PAGE_SIZE")
    pages = -(-buf.nbytes // page)
    vec = (ctypes.c_ubyte * pages)()
    assert libc.mincore(ctypes.c_void_p(buf.ctypes.data), ctypes.c_size_t(buf.nbytes), vec) == 0
    return sum(v & 1 for v in vec)


def test_memory_tracks_and_frame_buffers_are_touched_in_set_up_not_in_the_run():
    """A write's first touch of a fresh page faulted in the run: on a VM whose host had not yet
    given it the memory, frames came 30-56 ms late, and the same command held when run again."""
    g = Geometry.of(("rrw", 2, 64, 62.5, 0.0, 0.05, 1))
    buffers = Buffers(False)
    tracks = MemoryTracks(buffers, g.tracks, g.slots, g.size)
    assert resident(tracks.data) == -(-tracks.data.nbytes // os.sysconf("SC_PAGE_SIZE"))
    frames = Frames(g, g.stages(), buffers, np.random.default_rng(1), sourced=False)
    for ring in frames.rings:
        for frame in ring:
            assert resident(frame) == -(-frame.nbytes // os.sysconf("SC_PAGE_SIZE"))
    buffers.close()


# Every label, on memory ----------------------------------------------------------------------

LABEL_ARGS = "{label} 3 64 62.5 0 0.1 1"   # 64 KB every 1 ms for 0.1 s: 100 frames, 16 slots


@pytest.mark.parametrize("label", sorted(LABELS))
def test_each_label_runs_its_dependencies_in_order_and_moves_the_data(label):
    test = build(f"-memStreams {LABEL_ARGS.format(label=label)}")
    g = test.geometry
    assert (g.frames, g.slots) == (100, 16)
    results, trace = run_stream(test)
    ops = by_op(trace)
    st = test.stages
    assert {i: len(v) for i, v in ops.items()} == {s.index: 100 for s in st}
    for s in st:
        for k, (t0, _) in ops[s.index].items():
            for d in s.op.deps:                       # a dependent transfer waits for its input
                assert t0 >= ops[d][k][1], (s.name, k, d)
            for j in range(s.index + 1, len(st)):     # a slot is reused only once later
                if st[j].op.track == s.op.track and k >= g.slots:   # sub-streams are done
                    assert t0 >= ops[j][k - g.slots][1], (s.name, k, j)
    row = results.rows[0]
    assert row["nsubs"] == len(st) and list(row["sub_xfers"][:len(st)]) == [100] * len(st)
    assert row["transfers"] == 100 * len(st) and row["bytes"] == 100 * len(st) * 64 * KB
    check_tracks(test)


def check_tracks(test) -> None:
    """The final tracks hold what the label says, computed here from the source frames."""
    g, data = test.geometry, test.tracks.data
    patterns = test.frames.patterns

    def source(track, slot):
        f = patterns[track].copy()
        stamp(f, SOURCE | track, slot)
        return f
    label = g.label
    last = {slot: slot + (g.frames - 1 - slot) // g.slots * g.slots for slot in range(g.slots)}
    for slot, k in last.items():
        if label in ("w", "wr"):
            want = patterns[0].copy()
        elif label in ("rw", "rwr"):
            passes = k // g.slots + 1
            want = ~source(0, slot) if passes % 2 else source(0, slot)
        elif label == "rrw":
            want = source(0, slot) ^ source(1, slot)
            assert np.array_equal(data[0, slot], source(0, slot))      # sources unchanged
            assert np.array_equal(data[1, slot], source(1, slot))
        else:
            assert np.array_equal(data[0, slot], source(0, slot))
            continue
        track = 2 if label == "rrw" else 0
        stamp(want, WRITTEN | track, k)
        assert np.array_equal(data[track, slot], want), (label, slot)


def test_wr_reads_back_exactly_what_was_written():
    seen = []

    class Keep:
        def __init__(self, tracks):
            self.tracks, self.data = tracks, tracks.data

        async def move(self, kind, track, slot, frame):
            t = await self.tracks.move(kind, track, slot, frame)
            if kind == READ:
                seen.append(frame.copy())
            return t

        async def forget(self):
            await self.tracks.forget()

        def close(self):
            self.tracks.close()
    test = build(f"-memStreams {LABEL_ARGS.format(label='wr')}")
    run_stream(test, Keep)
    assert len(seen) == 100 + 16                          # the run's, then check()'s
    for k, frame in enumerate(seen[:100]):
        assert header_of(frame) == (WRITTEN, k)
        assert np.array_equal(frame[16:], test.frames.patterns[0][16:])


class SlowWrites:
    """Memory tracks whose writes of chosen frames land `delay` seconds late."""

    def __init__(self, tracks, frames: set[int], delay: float):
        self.tracks, self.data, self.frames, self.delay = tracks, tracks.data, frames, delay
        self.writes = 0

    async def move(self, kind, track, slot, frame):
        if kind == WRITE:
            if self.writes in self.frames:
                await asyncio.sleep(self.delay)
            self.writes += 1
        return await self.tracks.move(kind, track, slot, frame)

    async def forget(self):
        await self.tracks.forget()

    def close(self):
        self.tracks.close()


def test_the_first_read_runs_at_most_lookahead_frames_ahead_of_its_consumer():
    test = build(f"-memStreams {LABEL_ARGS.format(label='rw')}")      # lookahead 3
    _, trace = run_stream(test, lambda t: SlowWrites(t, {0, 40}, 0.05))
    ops = by_op(trace)
    ahead = [k - done_by(ops, 1, t0) for k, (t0, _) in ops[0].items()]
    assert max(ahead) == 3                       # reached while write 0 and write 40 hang ...
    assert ops[0][3][0] < ops[1][0][1] <= ops[0][4][0]   # ... and never passed
    assert ops[0][43][0] < ops[1][40][1] <= ops[0][44][0]


def test_without_its_gates_a_read_back_gets_stale_data_and_the_stream_fails():
    test = build(f"-memStreams {LABEL_ARGS.format(label='wr')}")
    test.stages = tuple(s.__class__(s.index, s.op, s.stage, s.lead, s.consumers, ())
                        for s in test.stages)
    with pytest.raises(Failure, match="found frame"):
        run_stream(test, lambda t: SlowWrites(t, {5}, 0.01))


def test_check_catches_a_frame_changed_after_it_was_written():
    class Spoil(SlowWrites):
        async def move(self, kind, track, slot, frame):
            t = await super().move(kind, track, slot, frame)
            if kind == WRITE and self.writes == 100:        # the last write: flip one byte
                self.data[track, slot, 1000] ^= 1
            return t
    test = build(f"-memStreams {LABEL_ARGS.format(label='rrw')}")
    with pytest.raises(Failure, match="same header, other data"):
        run_stream(test, lambda t: Spoil(t, set(), 0))


def test_an_impossible_target_counts_every_transfer_late():
    test = build("-memStreams r 0 1024 102400 0 0.005 64")    # 100 GB/s: 512 transfers of 1 MB
    results, _ = run_stream(test)
    row = results.rows[0]
    assert row["sub_xfers"][0] == 512
    assert row["late"][0] == 512 and row["late_run"][0] == 512
    assert 0 < row["late_min"][0] <= row["late_max"][0]
    assert row["late_hist"][0].sum() == 512
    assert row["bytes"] / MB / ((row["finish"] - row["start"]) / 1e9) < 102400


# Streams on files ----------------------------------------------------------------------------

def test_a_file_stream_reads_back_its_writes_and_removes_its_scratch_file(tmp_path):
    test = build("-streams wr 1 64 62.5 0 0.05 1")
    results, trace = run_stream(test)
    row = results.rows[0]
    assert len(trace) == 100 and list(row["sub_xfers"][:2]) == [50, 50]
    assert row["file"].decode().startswith(str(tmp_path))
    scratch.settle()                                      # removed by a thread behind the run
    assert os.listdir(tmp_path) == []                     # the scratch directory is gone
    probe = tmp_path / "probe"
    probe.touch()
    try:
        os.close(os.open(probe, os.O_RDONLY | os.O_DIRECT))
        direct = True
    except OSError:                                       # tmpfs before Linux 6.6
        direct = False
    assert test.tracks.direct == direct and test.tracks.drop != direct
    assert test.tracks.note in test.info


def test_set_up_writes_every_source_frame_in_its_place():
    test = build("-streams rrw 1 64 62.5 0 0.05 1")          # tracks 0 and 1: 16 frames each
    g = test.geometry

    async def go():
        await test.setup()
        try:
            with open(test.tracks.path, "rb") as fh:
                data = np.frombuffer(fh.read(), np.uint8)
        finally:
            await test.close()
        return data
    data = asyncio.run(go()).reshape(-1, g.slots, g.size)
    assert data.shape[0] == 3 and not data[2].any()       # the written track is left alone
    for track in (0, 1):
        for slot in range(g.slots):
            want = test.frames.patterns[track].copy()
            stamp(want, SOURCE | track, slot)
            assert np.array_equal(data[track, slot], want), (track, slot)


def test_a_stream_the_device_cannot_take_o_direct_drops_each_transfer_from_the_cache(
        tmp_path, monkeypatch):
    dropped = []
    fadvise = os.posix_fadvise

    def spy(fd, offset, length, advice):
        dropped.append((offset, length, advice))
        fadvise(fd, offset, length, advice)
    monkeypatch.setattr(os, "posix_fadvise", spy)
    monkeypatch.setattr(tracks_module, "block_size", lambda path: 8 * KB)   # 4 KB frames: odd
    test = build("-streams wr 1 4 3.125 0 0.04 1")                  # 4 KB every 1.25 ms
    moved = []

    class Count:
        def __init__(self, tracks):
            self.tracks = tracks

        def __getattr__(self, name):
            return getattr(self.tracks, name)

        async def move(self, kind, track, slot, frame):
            moved.append(self.tracks.offset(track, slot))
            return await self.tracks.move(kind, track, slot, frame)
    run_stream(test, Count)
    assert not test.tracks.direct and "4096 is not a multiple of 8192" in test.info
    ranges = [(o, n) for o, n, advice in dropped if advice == os.POSIX_FADV_DONTNEED]
    assert len(moved) > 64 and sorted(ranges) == sorted([(0, 0)] + [(o, 4 * KB) for o in moved])


def test_a_user_file_is_written_and_kept(tmp_path):
    path = tmp_path / "cam.dat"
    run_stream(build("-streams w 2 64 62.5 0 0.05 1", "-f", str(path)))
    data = np.fromfile(path, np.uint8).reshape(-1, 64 * KB)       # 16 slots, frames 0..49
    assert [header_of(f) for f in data] == [(WRITTEN, 48 + s if s < 2 else 32 + s)
                                            for s in range(16)]


def test_a_stream_takes_the_file_of_its_own_test_number_as_the_file_tests_do(tmp_path):
    a, b = str(tmp_path / "a.dat"), str(tmp_path / "b.dat")
    stream = "-streams w 2 64 62.5 0 0.05 1".split()
    for s, want in (((), b), (("-s", "0"), a)):     # test 1: file 1 of the list, unless -s
        test = build(" ".join([*s, *stream]), "-f", a, "-f", b, "-r", row=1)

        async def path():
            tracks = test.open_tracks()
            await tracks.forget()
            tracks.close()
            return tracks.path
        assert asyncio.run(path()) == want, s
    from torque_async import validate
    with pytest.raises(cmdline.UsageError, match="process 0 needs file number 1"):
        validate.check(cmdline.parse(["-f", a, "-n", "4", "-KB", "4", "-r", *stream]))


def test_rw_on_a_user_file_changes_its_data_in_place(tmp_path):
    path = tmp_path / "video.dat"
    original = np.random.default_rng(3).integers(0, 256, (16, 64 * KB), np.uint8)
    original.tofile(path)
    results, trace = run_stream(build("-streams rw 2 64 62.5 0 0.05 1", "-f", str(path)))
    assert len(trace) == 100
    data = np.fromfile(path, np.uint8).reshape(16, 64 * KB)
    for slot in range(16):                       # frames 0..49: slots 0, 1 written 4 times
        passes = 4 if slot < 2 else 3
        want = original[slot] if passes % 2 == 0 else ~original[slot]
        assert np.array_equal(data[slot, 16:], want[16:])
        assert header_of(data[slot]) == (WRITTEN, slot + 16 * (passes - 1))


def test_usage_errors_of_stream_groups(tmp_path):
    from torque_async import validate
    with pytest.raises(cmdline.UsageError, match="holds no transfer"):
        validate.check(cmdline.parse("-memStreams r 2 4096 100 0 1 2".split()))
    with pytest.raises(cmdline.UsageError, match="needs file number 1"):
        validate.check(cmdline.parse(["-f", str(tmp_path / "a"), "-p", "2", "-streams", "w",
                                      "2", "64", "10", "0", "1", "1"]))
    with pytest.raises(cmdline.UsageError, match="reads 1 MB"):
        validate.check(cmdline.parse(["-f", str(tmp_path / "a"), "-streams", "r",
                                      "2", "64", "100", "0", "1", "1"]))
    # one frame paced over a period past its runTime: the run went on for the whole period
    for bw, every in (("0.1", "10"), ("0.9", "1.11111"), ("1e-9", r"1e\+09")):
        with pytest.raises(cmdline.UsageError, match=rf"^-memStreams r: a frame every {every} s "
                           rf"does not fit in its runTime of 1 s"):
            validate.check(cmdline.parse(f"-memStreams r 2 1024 {bw} 0 1 16".split()))
    validate.check(cmdline.parse("-memStreams r 2 1024 1 0 1 16".split()))   # one a second


def test_lateness_figures_of_a_known_sequence():
    late = Lateness()
    for ns in (0, 5, 7, -3, 9, 9, 9, 0):
        late.add(ns)
    late.settle()
    assert (late.count, late.late, late.longest) == (8, 5, 3)
    assert (late.lo, late.hi, late.total) == (0, 9, 39) and sum(late.hist) == 8


def test_stages_derive_stage_lead_and_gates_from_the_label():
    rwr = stages("rwr", 4, 16)
    assert [s.stage for s in rwr] == [0, 1, 2] and [s.lead for s in rwr] == [4, 0, 0]
    assert rwr[0].gates == ((1, -4), (1, -15), (2, -15))
    assert rwr[1].gates == ((0, 1), (2, -15)) and rwr[2].gates == ((1, 1),)
    rrw = stages("rrw", 2, 8)
    assert [s.stage for s in rrw] == [0, 0, 1] and [s.lead for s in rrw] == [2, 2, 0]
    assert rrw[0].gates == ((2, -2),) and rrw[2].gates == ((0, 1), (1, 1))
    assert stages("r", 3, 8)[0].gates == () and stages("r", 3, 8)[0].lead == 3
