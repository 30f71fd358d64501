"""Wired stages (-from G): a stream reading what an earlier stream writes, on a virtual clock that
runs both pipelines together (order, inherited lateness, lapping, drops), and the command line
(bad input, -quit, a real three-stage run and its report)."""
from __future__ import annotations

import asyncio
import copy
import heapq
import itertools
import json
from fractions import Fraction

import numpy as np
import pytest

from conftest import run_cli
from torque_async import compare
from torque_async.kind_api.api import TestError as Failure
from torque_async.kind_api.buffers import Buffers
from torque_async.streams.frames import WRITTEN, Frames, header_of
from torque_async.streams.pipeline import Pipeline, Progress, Timeline
from torque_async.streams.schedule import READ, Geometry, Pacer
from torque_async.streams.tracks import MemoryTracks
from torque_async.streams.wire import Wire, writer_of

PERIOD = 1_000_000                      # 64 KB frames at 62.5 MiB/s: 1 ms


class EventClock:
    """Virtual time for several coroutines: a sleeper wakes at its time; time moves to the next
    wake-up only when every coroutine waits (for a sleep, a transfer or a gate)."""

    def __init__(self, t: int):
        self.t, self.sleepers, self.seq = t, [], itertools.count()

    def __call__(self) -> int:
        return self.t

    async def sleep_until(self, t: int) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self.sleepers, (t, next(self.seq), future))
        await future

    def simulate(self, *coroutines) -> None:
        """Run the coroutines to their end on virtual time (on asyncio's own loop, whose ready
        queue drive() looks at)."""
        with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
            runner.run(self.drive(*coroutines))

    async def drive(self, *coroutines) -> None:
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(c) for c in coroutines]
        while not all(t.done() for t in tasks):
            await asyncio.sleep(0)
            if loop._ready or not self.sleepers:         # someone can still run
                if not loop._ready:
                    await asyncio.sleep(0.001)           # (a gate's slice timeout)
                continue
            t, _, future = heapq.heappop(self.sleepers)
            self.t = max(self.t, t)
            future.set_result(None)
        for t in tasks:
            t.result()


class TimedTracks:
    """Memory tracks whose transfers take durations(kind, frame) of virtual time without holding
    the loop (as a file transfer); `seen` keeps the header each read found. A wired read moves
    through its writer's tracks."""

    def __init__(self, tracks, clock: EventClock, durations):
        self.tracks, self.clock, self.durations = tracks, clock, durations
        self.where, self.seen = "memory", {}

    async def move(self, kind, track, slot, frame, k=None):
        if kind == READ:                              # the read copies what the slot holds
            await self.tracks.move(kind, track, slot, frame)     # when it completes
        await self.clock.sleep_until(self.clock.t + self.durations(kind, frame))
        if kind != READ:
            await self.tracks.move(kind, track, slot, frame)
        else:
            self.seen.setdefault(track, []).append(header_of(frame))
        return self.clock.t


def stage(label, clock, start, durations, mfile=64, run=0.05, wire=None, buffer=0, drop=False):
    """One stream's pipeline on the clock, started at `start` (+ its wire's delay)."""
    g = Geometry.of((label, 1, 64, 62.5, 0.0, run, mfile))
    st, buffers = g.stages(), Buffers(False)
    tracks = TimedTracks(MemoryTracks(buffers, g.tracks, g.slots, g.size), clock, durations)
    frames = Frames(g, st, buffers, np.random.default_rng(1), sourced=False,
                    wired=wire and wire.frames)
    output = Progress() if writer_of(label) >= 0 else None
    trace: list = []
    pipe = Pipeline(st, Pacer(start + (wire.delay if wire else 0), g.period), tracks, frames,
                    clock, clock.sleep_until, lambda: False, trace, 0, drop, buffer, wire, output)
    pipe.measured, pipe.record = g.frames, lambda latency, end: None
    pipe.timeline = Timeline(g.frames * len(st), 1024)
    pipe.g, pipe.output = g, output
    return pipe


def wire_to(up, group=0) -> Wire:
    writer = up.stages[writer_of(up.g.label)]
    return Wire(group, up.tracks, writer.op.track, up.g.slots, up.output,
                up.frames.dropped[writer.index], up.frames,
                (up.wire.delay if up.wire else 0) + (writer.stage + 1) * PERIOD)


async def whole(pipe):
    """A stream's run, its output closed at its end (as StreamTest.run does)."""
    try:
        await pipe.run(pipe.g.frames)
    finally:
        if pipe.output is not None:
            pipe.output.closed = True
            pipe.output.release()


def chain(*specs, start=10**12):
    """Pipelines wired each to the one before, run together: [(label, durations, kwargs)]."""
    clock = EventClock(start)
    pipes = []
    for label, durations, kw in specs:
        pipes.append(stage(label, clock, start, durations, wire=wire_to(pipes[-1])
                           if pipes else None, **kw))
    clock.simulate(*(whole(p) for p in pipes))
    return pipes


def ops(pipe) -> dict[int, dict[int, tuple[int, int]]]:
    out: dict = {}
    for i, k, t0, t1 in pipe.trace:
        out.setdefault(i, {})[k] = (t0, t1)
    return out


def quick(kind, frame) -> int:
    return 100_000


def slow_frames(which, ns):
    """Writes of frames in `which` take ns (a frame's number is in its header), all else
    100 us."""
    return lambda kind, frame: ns if kind != READ and header_of(frame)[1] in which else 100_000


def slow_reads(ns):
    """Reads take ns (a wired reader's, through its writer's tracks), writes 100 us."""
    return lambda kind, frame: ns if kind == READ else 100_000


def test_a_wired_read_starts_only_after_its_writer_completed_that_frame():
    # the capture's writes of frames 5..9 take 2.5 periods: the reads wait, never overtake
    cap, play = chain(("w", slow_frames(range(5, 10), 2_500_000), {}), ("r", quick, {}))
    writes, reads = ops(cap)[0], ops(play)[0]
    assert len(reads) == len(writes) == cap.g.frames == 50
    for k, (read_start, _) in reads.items():
        assert read_start >= writes[k][1], k            # write k completed before read k began
    waited = [k for k in range(5, 20) if reads[k][0] == writes[k][1]]
    assert waited                                        # it did wait on the writer: not a
                                                         # test that held by luck of timing
    assert play.tracks.seen == {}                        # read in the writer's tracks:
    assert cap.tracks.seen[0] == [(WRITTEN | 0, k) for k in range(50)]   # its frames, k


def test_a_slow_upstream_s_lateness_is_inherited_downstream_not_the_reader_s_own():
    cap, proc, play = chain(("w", slow_frames({10, 11, 12}, 3_000_000), {}),
                            ("rw", quick, {}), ("r", quick, {}))
    assert cap.lateness[0].late >= 3                     # the capture missed: its own
    for pipe in (proc, play):
        for s in pipe.lateness:
            s.settle()
            assert s.late == 0 and s.hi < PERIOD, (pipe.g.label, s.hi)   # nothing of its own
            assert s.up_late >= 1 and s.up_lost >= 1 and s.up_max > PERIOD  # inherited
    # process's write inherited through its read (its input), not only the read itself
    assert proc.lateness[1].up_max > PERIOD
    # each stage one period behind the stage it reads: frame k is due at the process's read
    # one period after the capture's deadline, at playout one after the process's write's
    deadline = lambda pipe, stage, k: pipe.pacer.release(k + stage + 1)      # noqa: E731
    for k in (0, 7, 49):
        assert deadline(proc, 0, k) == deadline(cap, 0, k) + PERIOD
        assert deadline(play, 0, k) == deadline(proc, 1, k) + PERIOD


def test_a_reader_whose_own_transfers_are_slow_is_late_on_its_own():
    cap, play = chain(("w", slow_reads(2_000_000), {}), ("r", quick, {}))
    s = play.lateness[0].settle()
    assert s.late > 10 and s.up_late == 0 and s.up_lost == 0 and cap.lateness[0].late == 0


@pytest.mark.parametrize("label", ["rw", "rwr", "rrw"])
def test_a_read_held_up_by_the_stage_s_own_slow_write_is_late_on_its_own(label):
    # the capture holds every frame; the process stage's writes of frames 10..12 take 3
    # periods, and its reads, which may run only a frame ahead of that write, wait for it:
    # their lateness is the stage's own (its write), none of it the capture's
    cap, proc = chain(("w", quick, {}), (label, slow_frames(range(10, 13), 3_000_000), {}))
    assert cap.lateness[0].settle().late == 0
    reads = [s.settle() for st, s in zip(proc.stages, proc.lateness) if st.op.kind == READ]
    assert all(s.up_late == s.up_lost == s.up_max == 0 for s in proc.lateness), label
    assert all(s.late >= 5 and s.hi > PERIOD for s in reads)      # late: its own


def test_a_stage_s_own_late_wake_ups_are_its_own_lateness():
    # the capture holds every frame; the loop wakes the process stage 1.5 periods after each
    # time it asked for (its thread starved, say): its lateness is its own, none inherited
    clock = EventClock(10**12)
    cap = stage("w", clock, clock.t, quick)
    proc = stage("rw", clock, clock.t, quick, wire=wire_to(cap))

    async def late(t):
        await clock.sleep_until(t + 3 * PERIOD // 2)
    proc.sleep_until = late
    clock.simulate(whole(cap), whole(proc))
    assert cap.lateness[0].settle().late == 0
    assert all(s.settle().up_late == s.up_lost == s.up_max == 0 for s in proc.lateness)
    assert proc.lateness[1].late >= 10 and proc.lateness[1].hi > 0       # late: its own


def test_a_stage_resumed_late_after_its_frame_came_on_time_is_late_on_its_own():
    # the capture completes frame 10 on time; the loop then runs something else for 2.5
    # periods before it resumes the process stage that waited for that frame: the read's
    # lateness is the stage's own (the frame was there), not the capture's
    clock = EventClock(10**12)
    cap = stage("w", clock, clock.t, quick)
    proc = stage("rw", clock, clock.t, quick, wire=wire_to(cap))

    async def hog():                      # woken first by frame 10, it holds the loop
        await cap.output.reach(11)
        clock.t += 5 * PERIOD // 2
    clock.simulate(hog(), whole(cap), whole(proc))
    read = proc.lateness[0].settle()
    assert read.late >= 1 and read.hi > PERIOD // 4                # its own
    assert ops(proc)[0][10][0] >= ops(cap)[0][10][1] + 5 * PERIOD // 2     # (it was held)


def test_a_writer_never_waits_for_a_reader_a_track_behind_whose_frames_are_lost_lapped():
    # 16 slots a track (mfile 1 MB of 64 KB frames); the reader takes 3 periods a frame and
    # falls behind, the writer goes on
    cap, play = chain(("w", slow_reads(3_000_000), {"mfile": 1}), ("r", quick, {"mfile": 1}))
    assert cap.g.slots == 16
    s = play.lateness[0].settle()
    assert cap.lateness[0].late == 0                      # the writer kept its rate
    assert max(t1 for _, _, _, t1 in cap.trace) < min(t1 for *_, t1 in play.trace[-5:])
    assert s.lapped > 0 and s.late >= s.lapped           # lost: counted, no data error
    assert len(play.trace) == play.g.frames               # every frame still read


def test_a_frame_whose_overwriting_frame_the_writer_dropped_is_not_lapped():
    # 16 slots; the reader falls behind (its reads take 2.5 periods) and the capture drops
    # frames 27..33: slots 11..17 then keep frames 11..17 a track longer, and a read of them
    # is lapped only when the writer began a frame of the slot that it wrote (43, ...)
    clock = EventClock(10**12)
    cap = stage("w", clock, clock.t, slow_reads(2_500_000), mfile=1, drop=True)
    cap.skips = lambda st, k, alone: "own" if 27 <= k < 34 else ""
    play = stage("r", clock, clock.t, quick, mfile=1, wire=wire_to(cap))
    clock.simulate(whole(cap), whole(play))
    began = {k: t0 for _, k, t0, _ in cap.trace}
    lapped = [k for _, k, _, t1 in play.trace
              if any(began.get(j, t1) < t1 for j in range(k + 16, k + 16 * 4, 16))]
    read = dict(zip((k for _, k, *_ in play.trace), cap.tracks.seen[0]))
    assert 0 < len(lapped) < 16
    assert play.lateness[0].settle().lapped == len(lapped)
    assert all(read[k] == (WRITTEN, k) for k in read if k not in lapped)


def test_a_process_stage_whose_reads_were_lapped_passes_its_data_check():
    """A process stage that fell a track behind made its last frames from whichever later
    frames its lapped reads found: lost (Lapped), no data error. The capture is an rw on
    source frames, whose frames differ from pass to pass (a w's are all alike), and it writes
    90 frames (-slow's extra ones) to the stage's 50, so the stage's last reads are lapped."""
    from types import SimpleNamespace
    from torque_async.streams.stream import StreamTest
    clock = EventClock(10**12)
    reading: list = []                    # the stage's read buffers: its reads take 3 periods
    cap = stage("rw", clock, clock.t, lambda kind, frame: 3_000_000 if any(
        frame is b for b in reading) else 100_000, mfile=1, run=0.09)
    cap.frames.sourced = True
    for slot in range(cap.g.slots):
        source = np.empty(cap.g.size, np.uint8)
        cap.frames.source_frame(source, 0, slot)
        asyncio.run(cap.tracks.tracks.move("w", 0, slot, source))
    proc = stage("rw", clock, clock.t, quick, mfile=1, wire=wire_to(cap))
    reading.extend(proc.frames.rings[0])
    clock.simulate(whole(cap), whole(proc))
    assert proc.lateness[0].settle().lapped > proc.g.slots
    checked = SimpleNamespace(pipeline=proc, geometry=proc.g, frames=proc.frames,
                              buffers=Buffers(False), tracks=proc.tracks.tracks,
                              wire=proc.wire, stages=proc.stages)
    asyncio.run(StreamTest.check(checked))                           # no data error
    last = range(proc.g.frames - proc.g.slots, proc.g.frames)       # the frames it read
    assert set(last) <= proc.frames.lapped
    assert proc.frames.body(proc.stages[1], last[0], []) is None     # unknown, not checked
    assert cap.frames.output(0) is not None                          # (a known one is)


def test_a_frame_the_writer_dropped_is_dropped_downstream_as_the_upstream_s():
    clock = EventClock(10**12)
    cap = stage("w", clock, clock.t, quick, drop=True)
    cap.skips = lambda st, k, alone: "own" if k in (7, 8) else ""
    play = stage("rw", clock, clock.t, quick, wire=wire_to(cap))
    clock.simulate(whole(cap), whole(play))
    assert cap.lateness[0].dropped == 2
    moved = {(i, k) for i, k, *_ in play.trace}
    assert not moved & {(0, 7), (0, 8), (1, 7), (1, 8)}   # never read, nor processed
    for s in play.lateness:                               # without -dropLate of its own
        assert s.dropped == 0 and s.late == 0 and s.up_lost == 2


def test_a_downstream_that_starts_before_its_upstream_waits_and_the_wait_is_inherited():
    clock = EventClock(10**12)
    cap = stage("w", clock, clock.t + 20 * PERIOD, quick)     # capture starts 20 periods later
    play = stage("r", clock, clock.t, quick, wire=wire_to(cap))
    clock.simulate(whole(cap), whole(play))
    s = play.lateness[0].settle()
    assert s.late == 0 and s.hi == 0                          # nothing of its own
    assert s.up_lost > 10 and s.up_max >= 18 * PERIOD         # all of it the capture's


def test_a_broken_gate_that_lets_a_read_overtake_is_a_named_data_error():
    clock = EventClock(10**12)
    cap = stage("w", clock, clock.t + 5 * PERIOD, quick)
    wire = wire_to(cap)
    lying = Progress()
    lying.done = 10**6                                        # "every frame written"
    play = stage("r", clock, clock.t, quick, wire=Wire(*[lying if f == "progress" else getattr(
        wire, f) for f in ("group", "tracks", "track", "slots", "progress", "dropped", "frames",
                           "delay")]))
    with pytest.raises(Failure, match=r"-from 0\): transfer 0 .* instead of"):
        clock.simulate(whole(cap), whole(play))


# The command line ------------------------------------------------------------------------------

W = "-memStreams w 2 64 62.5 0 0.2 1".split()
R = "-memStreams r 2 64 62.5 0 0.2 1".split()


@pytest.mark.parametrize("plan, says", [
    (["-from", "0", *R], "group 0 is this stream itself"),
    ([*R, "-from", "0", *R], "writes nothing"),
    (["-from", "1", *R, *W], "comes later"),
    (["-from", "3", *R], "there is no group 3"),
    (["-streams", *W[1:], "-from", "0", *R], "group 0 is -streams"),
    ([*W, "-from", "0", "-memStreams", "wr", *R[2:]], "reads first"),
    ([*W, "-from", "0", "-memStreams", "r", "2", "32", *R[4:]], "give both the same"),
    ([*W, "-from", "0", "-memStreams", "r", "2", "64", "125", *R[5:]], "give both the same"),
    ([*W, "-from", "0", *R[:6], "0.4", "1"], "no more frames than its writer"),
    ([*W[:6], "0.001", "1", "-from", "0", *R[:6], "0.001", "1"], "room for 2 frames"),
    (["-memStreams", "w", "2", "1024", "1000", "0", "0.2", "1", "-from", "0", "-memStreams",
      "r", "2", "1024", "1000", "0", "0.2", "1"], "group 0's track holds 1 frame"),
    ([*W, "-p", "2", "-from", "0", *R], "give both the same -p"),
    (["-baseline", *W, "-from", "0", *R], "-baseline runs each group alone"),
    (["-streams", *W[1:], "-m", "-from", "0", "-streams", *R[1:]], "-m differs from group 0's"),
    (["-n", "4", "-MB", "1", "-load", "-from", "0", *R], "group 0 is -load"),
])
def test_bad_wiring_is_one_line_and_exit_2(plan, says):
    out = run_cli("-quit", *plan)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert says in out.stderr and "-from" in out.stderr


def test_quit_shows_the_wiring():
    out = run_cli("-quit", *W, "-from", "0", "-memStreams", "rw", *R[2:], "-from", "1", *R)
    assert out.returncode == 0, out.stderr
    assert "  0 read t0: reads group 0's frames (-from 0)" in out.stdout
    assert "  0 read t0: reads group 1's frames (-from 1)" in out.stdout
    assert out.stdout.count("reads group") == 2


@pytest.mark.parametrize("action", ["-memStreams", "-streams"])
def test_a_real_three_stage_pipeline_passes_its_checks_and_reports_its_stages(action, tmp_path):
    a = [action, *W[1:]]
    out = run_cli("-smkey", f"0x7A5{len(action)}", "-json", str(tmp_path / "r.json"), *a,
                  "-from", "0", action, "rw", *a[2:], "-from", "1", action, "r", *a[2:])
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.count("0 read t0: reads group 0's frames (-from 0)") == 1     # group blocks
    assert text.count("0 read t0: reads group 1's frames (-from 1)") == 1
    table = text.split("Stages (-from)")[1].split("\n\n")[0].splitlines()
    assert table[1] == "proc,sub,From,Lost,Lapped,max(us),UpLate,UpLost,UpMax(us),Test"
    rows = [r.split(", ") for r in table[2:] if not r.startswith("proc ")]   # (not a starved
                                                                            # loop's line)
    assert [(r[0], r[1], r[2]) for r in rows] == [("1", "0 read t0", "0"), ("1", "1 write t0", "0"),
                                                  ("2", "0 read t0", "1")]
    doc = json.loads((tmp_path / "r.json").read_text())
    from test_export import VALIDATOR
    VALIDATOR.validate(doc)
    tests = doc["tests"]
    assert all(t["state"] == "done" and t["check"]["values"] for t in tests)   # data checked
    assert tests[0]["streams"]["sub0"]["from_group"] is None
    assert [tests[i]["streams"]["sub0"]["from_group"] for i in (1, 2)] == [0, 1]
    frames = tests[2]["streams"]["sub0"]["frames"]
    assert frames == 200                                   # 0.2 s of 1 ms frames, all read
    start = [t["record"]["start"] for t in tests]
    assert start[0] < start[1] < start[2]                  # one period behind each writer's
    assert Fraction(start[2] - start[0], PERIOD) > 2.5     # stage: 1 + 2 periods
    playout = tests[2]["streams"]["sub0"]             # compare: what a stage inherited, apart
    got = compare.figures(tests[2])
    assert [got[f"sub 0 {k}"][2] for k in ("lapped", "inherited late", "inherited lost")] == \
        [playout["lapped"], playout["up_late"], playout["up_lost"]]
    assert got["sub 0 inherited max"] == ("us", False, playout["up_max"] / 1000)
    assert not any("inherited" in k or "lapped" in k for k in compare.figures(tests[0]))
    later = copy.deepcopy(doc)
    later["tests"][2]["streams"]["sub0"]["up_late"] += 40     # the capture's lateness grew
    found = {(c.test.split(" [")[0], c.figure): c for c in compare.compare(doc, later).changes}
    grew = [(c.a, c.b) for (t, f), c in found.items() if f == "sub 0 inherited late"
            and t.startswith("-from 1")]
    assert grew == [((playout["up_late"],), (playout["up_late"] + 40,))]


def test_capacity_varies_every_stage_of_a_wired_pipeline_together():
    """-p of one stage alone would break the wiring (each stage's process i reads process i of
    the one before): capacity's -p N is N whole pipelines; a group not wired keeps its -p."""
    from torque_async import cmdline, varied
    argv = ["-p", "2", "-n", "4", "-MB", "1", "-load", *W, "-from", "1", "-memStreams", "rw",
            *R[2:], "-from", "2", *R]
    lay = varied.layout(argv)
    for group in (1, 2, 3):
        knob = varied.knob(cmdline.parse(argv), group, "procs")
        assert knob.stages == (1, 2, 3) and knob.where.startswith("groups 1, 2, 3")
        tokens = varied.tokens_at(lay, knob, 3, False)
        assert [g.local.p for g in cmdline.parse(tokens).groups] == [2, 3, 3, 3]
        assert run_cli("-quit", *tokens).returncode == 0          # its checks pass
    assert varied.knob(cmdline.parse(argv), 0, "procs").stages == ()
    out = run_cli("capacity", "--keep", "2 bw>0.5", "--", *argv)    # a stage cannot run alone
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "group 2 is a stage wired by -from" in out.stderr
    mixed = ["-fps", "1000", "-frame", "64x256", "-pixfmt", "rgba8", *W[:3], "0", "0",
             *W[5:], "-from", "0", *R]                      # the same frames, said two ways
    assert run_cli("-quit", *mixed).returncode == 0
    out = run_cli("capacity", "--vary", "rate", "--", *mixed)   # one value cannot edit both
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "-fps on group(s) 0 and MiB/s on the others" in out.stderr


def test_the_process_stage_s_check_compares_what_it_wrote_with_what_it_made_of_the_capture():
    """After the run, check() compares the process stage's last frames with the capture's frame
    k inverted (header and body): one byte changed in its track is caught by name."""
    from torque_async import cmdline
    from torque_async.kind_api.api import TestContext
    from torque_async.meter import Meter
    from torque_async.results import Results, segment_name
    from torque_async.streams.stream import MemStreamTest
    plan = cmdline.parse([*W[:6], "0.05", "1", "-from", "0", "-memStreams", "rw", *W[2:6],
                          "0.05", "1"])
    tests = [MemStreamTest(TestContext(p.group, p.index, p.row, np.random.default_rng(p.row), 64,
                                       plan.settings)) for p in plan.procs()]
    results = Results.create(segment_name(0x7A5F0), 2)

    async def go():
        for test in tests:
            await test.setup()
        try:
            await asyncio.gather(*(t.run(Meter(results, i, None, slow=True))
                                   for i, t in enumerate(tests)))
            for test in tests:
                await test.check()                      # what ran is right
            process = tests[1]
            last = process.pipeline.progress[1].done - 1
            process.tracks.data[0, last % process.geometry.slots, -1] ^= 1
            with pytest.raises(Failure, match=f"not the frame {last} it wrote .same header"):
                await process.check()
        finally:
            for test in tests:
                await test.close()
    try:
        asyncio.run(go())
    finally:
        results.shm.unlink()


def test_set_up_wires_each_stage_one_period_behind_its_writer_s_stage():
    """The process stage (rw) reads the capture's track one period behind it; the playout reads
    the process stage's, whose write is its stage 1 and which itself started a period late."""
    from torque_async import cmdline
    from torque_async.kind_api.api import TestContext
    from torque_async.streams.stream import MemStreamTest
    plan = cmdline.parse([*W, "-from", "0", "-memStreams", "rw", *W[2:], "-from", "1", *R])
    tests = [MemStreamTest(TestContext(p.group, p.index, p.row, np.random.default_rng(p.row), 64,
                                       plan.settings)) for p in plan.procs()]

    async def go():
        try:
            for test in tests:
                await test.setup()
            assert tests[0].wire is None
            assert [t.wire.delay for t in tests[1:]] == [PERIOD, 3 * PERIOD]
            assert tests[2].wire.tracks is tests[1].tracks and tests[2].wire.track == 0
            assert tests[1].wire.progress is tests[0].output
        finally:
            for test in tests:
                await test.close()
    asyncio.run(go())


def test_a_stage_s_schedule_runs_from_its_writer_s_start_however_late_either_wakes(monkeypatch):
    """A stage's first frame is due one period after its writer's schedule began, not after its
    own wake-up: with the capture waking on time and the process stage 300 us late (the loop
    busy with the capture's frame), the stage's period still starts one period after the
    capture's (its first frames are then late by its own wake-up, not by the capture)."""
    from torque_async import cmdline, meter, streams
    from torque_async.kind_api.api import TestContext
    from torque_async.meter import Meter
    from torque_async.results import Results, segment_name
    from torque_async.streams.stream import MemStreamTest
    clock = EventClock(10**12)
    for module in (meter, streams.stream, streams.tracks):
        monkeypatch.setattr(module, "now", clock)
    plan = cmdline.parse([*W[:2], "1", *W[3:6], "0.02", "1", "-from", "0", "-memStreams", "rw",
                          "1", *W[3:6], "0.02", "1"])
    tests = [MemStreamTest(TestContext(p.group, p.index, p.row, np.random.default_rng(p.row), 64,
                                       plan.settings)) for p in plan.procs()]
    results = Results.create(segment_name(0x7A5F1), 2)

    class Late:
        """The precise timer on the clock, its wake-ups `by` ns late."""
        def __init__(self, by: int):
            self.by = by

        async def sleep_until(self, t: int) -> None:
            await clock.sleep_until(t + self.by)

    timers: list = []

    async def go():
        for test in tests:
            await test.setup()
        timers.extend(test.timer for test in tests)
        tests[0].timer, tests[1].timer = Late(0), Late(300_000)
        try:
            await asyncio.gather(*(t.run(Meter(results, i, None, slow=False))
                                   for i, t in enumerate(tests)))
        finally:
            for test, timer in zip(tests, timers):
                test.timer = timer
            for test in tests:
                await test.close()
    try:
        clock.simulate(go())
        capture, process = (t.pipeline.pacer.start for t in tests)
        assert process - capture == PERIOD
        assert tests[1].pipeline.lateness[0].up_late == 0     # its wake-up is not the capture's
    finally:
        results.shm.unlink()


def test_capacity_s_load_columns_leave_out_the_stages_it_varies():
    """The stages wired to the varied group are varied with it, not a load: the table's load
    columns name the groups not wired (here the -load alone), none per stage."""
    argv = ["-n", "4", "-MB", "1", "-load", *W[:2], "1", *W[3:6], "0.05", "1", "-from", "1",
            "-memStreams", "rw", "1", *W[3:6], "0.05", "1"]
    out = run_cli("capacity", "--group", "2", "--max", "1", "--rounds", "1", "--", *argv)
    header = next(line for line in out.stdout.splitlines() if line.startswith("-p,passed"))
    assert header.split(",")[3:-1] == ["load BW(MB/s)"], out.stdout + out.stderr


def test_a_wired_playout_s_memory_is_its_frame_buffers_not_a_track_of_its_own():
    """A wired r reads its writer's tracks: the memory check counts no mfile of its own (a
    14 GB capture and its playout need 14 GB of tracks, not 28)."""
    from torque_async import cmdline, limits
    plan = cmdline.parse([*W, "-from", "0", *R, "-from", "0", "-memStreams", "rw", *R[2:]])
    capture, playout, process = (limits.buffers_of(p) for p in plan.procs())
    g = Geometry.of(plan.groups[1].args, plan.groups[1].local)
    frames = (2 * g.lookahead + 6) * g.size
    assert playout == frames
    assert capture == process == frames + g.track_bytes


def test_a_wired_playout_makes_no_scratch_file():
    """A wired -streams r reads its writer's file: the free-space check counts the capture's
    scratch file alone."""
    from torque_async import cmdline, limits
    plan = cmdline.parse(["-streams", *W[1:], "-from", "0", "-streams", *R[1:]])
    g = Geometry.of(plan.groups[0].args, plan.groups[0].local)
    assert limits.disk_needs(plan)["."][:3] == [g.track_bytes, 0, 2]    # its file, its dir
