"""Video pipelines: frame units, the HELD/MISSED verdict, dropped frames, and file streams moved by
the I/O engine."""
from __future__ import annotations

import asyncio
from fractions import Fraction

import pytest

from torque_async import cmdline, report
from torque_async.results import Record
from torque_async.streams import tracks as tracks_module
from torque_async.streams.formats import frame_bytes, rate
from torque_async.streams.pipeline import Timeline
from torque_async.streams.schedule import WRITE, Geometry
from torque_async.units import MB

from conftest import AUTO, NO_URING, run_cli
from test_streams import SlowWrites, build, run_stream, virtual_pipeline

# Frame units -------------------------------------------------------------------------------


@pytest.mark.parametrize("pixfmt,size", [
    ("uyvy422", 1920 * 1080 * 2),                   # 2 bytes per pixel: 4 147 200
    ("yuyv422", 4_147_200),
    ("v210", 1920 // 6 * 16 * 1080),                # 6 pixels in 16 bytes, 1920 = 40 x 48
    ("nv12", 1920 * 1080 + 2 * 960 * 540),          # Y, then UV at half size: 3 110 400
    ("p010", 2 * (1920 * 1080 + 2 * 960 * 540)),    # as nv12, 16 bits a sample
    ("rgba8", 1920 * 1080 * 4), ("rgb10a2", 1920 * 1080 * 4)])
def test_1080p_frame_sizes_follow_the_formats_definitions(pixfmt, size):
    assert frame_bytes(pixfmt, 1920, 1080) == size
    assert (frame_bytes("uyvy422", 1920, 1080), frame_bytes("v210", 1920, 1080),
            frame_bytes("nv12", 1920, 1080)) == (4_147_200, 5_529_600, 3_110_400)


def test_v210_rows_are_padded_to_48_pixels_of_128_bytes():
    assert frame_bytes("v210", 1280, 720) == 27 * 128 * 720     # 1280 px: 26.7 -> 27 blocks
    assert frame_bytes("v210", 48, 1) == 128 and frame_bytes("v210", 54, 1) == 256
    assert frame_bytes("v210", 720, 486) == 15 * 128 * 486         # NTSC SD: 1920-byte rows
    with pytest.raises(ValueError, match="multiple of 2"):
        frame_bytes("v210", 1919, 1080)


def test_broadcast_rates_are_the_ntsc_fractions_and_others_the_decimal_typed():
    assert rate("59.94") == Fraction(60000, 1001) and rate("29.97") == Fraction(30000, 1001)
    assert rate("60") == 60 and rate("12.5") == Fraction(25, 2)
    assert rate("30000/1001") == Fraction(30000, 1001)


def test_frame_units_set_the_size_period_and_target():
    plan = cmdline.parse("-fps 59.94 -frame 1920x1080 -pixfmt uyvy422 -memStreams w 2 0 0 0 1 "
                         "64 -memStreams w 2 4050 237.3046875 0 1 64".split())
    g, same = (Geometry.of(group.args, group.local) for group in plan.groups)
    assert g.size == 4_147_200 and g.period == Fraction(1001 * 10**9, 60000)
    assert g.frames == 60 and round(g.bw, 3) == 237.068       # 4 147 200 x 59.94 / MiB
    assert (same.size, same.period) == (4_147_200, Fraction(10**9, 60))  # torque's arguments


# Verdicts ----------------------------------------------------------------------------------

def figures(args: str, wrap=None):
    """Run one memory stream (wrapped tracks) and read its sub-streams' figures back."""
    test = build(args)
    results, trace = run_stream(test, wrap)
    proc = cmdline.parse(args.split()).procs()[0]
    return report.sub_stream_figures(Record.of(results.rows[0], 0), proc), trace


class Slow(SlowWrites):
    """Tracks whose every transfer completes `delay` seconds late: the stream cannot keep up."""

    def __init__(self, tracks, delay: float):
        super().__init__(tracks, set(), delay)

    async def move(self, kind, track, slot, frame):
        await asyncio.sleep(self.delay)
        return await self.tracks.move(kind, track, slot, frame)


def test_a_stream_slowed_on_purpose_is_missed_and_shows_less_than_its_target():
    # 64 KB frames at 1000 fps for 0.05 s; each transfer takes at least 3 ms
    (sub,), _ = figures("-fps 1000 -memStreams w 0 64 0 0 0.05 1", lambda t: Slow(t, 0.003))
    assert sub.verdict == report.MISSED and sub.frames == 50
    assert sub.late >= 49 and sub.longest_late_run >= 49 and sub.dropped == 0
    assert sub.bw < sub.target_bw / 2 and sub.fps < 500
    assert 0 < sub.lateness_p50 <= sub.lateness_p99 <= sub.lateness_max


def test_a_tolerance_forgives_lateness_below_it_and_the_exit_status_says_missed():
    # 1 ms frames that each take 1.5 ms: frame k ends 0.5 (k + 1) ms after its deadline
    for tolerance, late in ((0, 10), (2_000_000, 6), (5_000_000, 0)):
        g, pipe, clock, trace = virtual_pipeline("w", 0, 64, 62.5, 0.01, lambda k: 1_500_000)
        pipe.lateness[0].tolerance = tolerance
        asyncio.run(pipe.run(g.frames))
        lateness = pipe.lateness[0].settle()
        assert (lateness.late, lateness.count, lateness.hi) == (late, 10, 5_000_000)
    start = pipe.pacer.start                  # the timeline: frame k ends at 1.5 (k + 1) ms
    assert pipe.timeline.points == [(start + 1_500_000 * (k + 1), 500_000 * (k + 1))
                                    for k in range(10)]
    coarse = Timeline(10, 4)                  # 3 transfers a point, the last run shorter
    for k in range(10):
        coarse.add(k, [0, 7, 3, 0, 0, 0, 9, 1, 1, 2][k])
    coarse.flush()
    assert coarse.points == [(2, 7), (5, 0), (8, 9), (9, 2)]
    missed = run_cli("-failLate", "-smkey", "0x7A1F0", "-memStreams", "r", "0", "1024",
                     "102400", "0", "0.01", "64")
    assert missed.returncode == 3, missed.stderr
    assert "streams: 0 held, 1 missed" in missed.stdout and "MISSED" in missed.stdout
    assert missed.stderr.splitlines()[-1] == \
        "torque-async: -failLate: 1 of 1 streams missed their rate (exit 3)"   # (it was silent)
    held = run_cli("-failLate", "-smkey", "0x7A1F1", "-lateUs", "1000000", "-memStreams", "r",
                   "0", "64", "1", "0", "0.2", "1")
    assert held.returncode == 0 and "streams: 1 held, 0 missed" in held.stdout, held.stdout
    assert "-failLate" not in held.stderr


def test_drop_late_skips_a_frame_a_whole_period_past_its_deadline_and_never_moves_it():
    # 1 ms period; frame 3 takes 3.5 ms: frame 4 could start at 6.5 ms, a period past its
    # deadline of 5 ms: dropped; frame 5 starts at 6.5 ms (deadline 6 ms): late; 6 on time
    g, pipe, clock, trace = virtual_pipeline(
        "w", 0, 64, 62.5, 0.01, lambda k: 3_500_000 if k == 3 else 100_000)
    pipe.drop = True
    asyncio.run(pipe.run(g.frames))
    moved = [k for _, k, _, _ in trace]
    assert moved == [0, 1, 2, 3, 5, 6, 7, 8, 9]
    lateness = pipe.lateness[0].settle()
    assert (lateness.count, lateness.late, lateness.dropped, lateness.longest) == (9, 2, 1, 3)
    assert pipe.frames.dropped[0] == {4}


def test_without_drop_late_every_frame_is_moved_late():
    g, pipe, clock, trace = virtual_pipeline(
        "w", 0, 64, 62.5, 0.01, lambda k: 3_500_000 if k == 3 else 100_000)
    asyncio.run(pipe.run(g.frames))
    assert [k for _, k, _, _ in trace] == list(range(10))
    assert pipe.lateness[0].dropped == 0 and pipe.lateness[0].late == 3      # 3, 4, 5


class SlowRead(Slow):
    """Tracks whose read of frame 10 hangs 40 periods: what follows is dropped."""

    def __init__(self, tracks, delay: float):
        super().__init__(tracks, delay)
        self.reads = 0

    async def move(self, kind, track, slot, frame):
        if kind != WRITE:
            self.reads += 1
            if self.reads == 11:
                await asyncio.sleep(self.delay)
        return await self.tracks.move(kind, track, slot, frame)


@pytest.mark.parametrize("label", ["rw", "wr", "rrw"])
def test_dropped_frames_are_counted_never_moved_and_the_data_still_checks(label):
    args = f"-dropLate -memStreams {label} 2 64 62.5 0 0.1 1"      # 1 ms frames, 16 slots
    subs, trace = figures(args, lambda t: SlowRead(t, 0.04))     # check() passed in run_stream
    moved: dict[int, set[int]] = {}
    for i, k, _, _ in trace:
        assert k not in moved.setdefault(i, set()), "a frame moved twice"
        moved[i].add(k)
    dropped = [sub.dropped for sub in subs]
    assert sum(dropped) > 0 and all(sub.verdict == report.MISSED for sub in subs if sub.dropped)
    for i, sub in enumerate(subs):
        assert sub.frames == 100 and len(moved[i]) == 100 - sub.dropped


# File streams on the I/O engine ------------------------------------------------------------

@pytest.mark.parametrize("engine,name", [("auto", AUTO), ("threads", "threads"),
                                         ("sync", "sync")])
def test_the_io_engine_moves_every_frame_of_a_file_stream(monkeypatch, engine, name):
    moved = []
    opened = tracks_module.open_engine

    def counting(which):
        eng = opened(which)
        transfer = eng.transfer

        def counted(write, fd, buf, offset):
            moved.append((eng.name, write, offset))
            return transfer(write, fd, buf, offset)
        eng.transfer = counted
        return eng
    monkeypatch.setattr(tracks_module, "open_engine", counting)
    test = build("-streams wr 1 64 62.5 0 0.05 1", "-engine", engine)
    results, trace = run_stream(test)
    assert f"I/O engine = {name}" in test.info
    # 50 writes and 50 read-backs, then check() reads the 16 slots back: all on the engine
    assert len(trace) == 100 and len(moved) == 116
    assert {n for n, _, _ in moved} == {name.split(" (")[0]}          # less auto's reason
    assert sum(write for _, write, _ in moved) == 50
    assert results.rows[0]["bytes"] == 100 * 64 * 1024


def test_sixteen_streams_share_the_loop_s_one_timer():
    from torque_async.timer import PreciseTimer

    async def go():
        timers = [PreciseTimer.shared() for _ in range(16)]
        fd = timers[0].fd
        assert all(t is timers[0] for t in timers)
        for t in timers[:15]:
            t.close()
        assert timers[0].fd == fd                       # still open for the last user
        timers[15].close()
        assert timers[0].fd < 0
    asyncio.run(go())


def test_a_json_document_and_csv_name_each_sub_stream_s_figures(tmp_path):
    import csv
    import json
    out = run_cli("-smkey", "0x7A1F2", "-json", str(tmp_path / "r.json"), "-csv",
                  str(tmp_path / "r.csv"), "-fps", "100", "-frame", "64x64", "-pixfmt", "rgba8",
                  "-memStreams", "rw", "1", "0", "0", "0", "0.1", "1")
    assert out.returncode == 0, out.stderr
    from test_export import VALIDATOR
    doc = json.loads((tmp_path / "r.json").read_text())
    VALIDATOR.validate(doc)                                      # the schema documents them
    stream = doc["tests"][0]["streams"]
    assert stream["verdict"] in ("HELD", "MISSED") and stream["sub2"] is None
    assert stream["sub1"]["sub"] == "1 write t0" and stream["sub1"]["frames"] == 10
    assert stream["sub0"]["target_fps"] == 100 and stream["sub0"]["target_bw"] == \
        64 * 64 * 4 * 100 / MB                                   # exact, not rounded
    row = next(csv.DictReader((tmp_path / "r.csv").open()))
    for sub in ("sub0", "sub1"):
        for name, unit in (("target_bw", "MB/s"), ("bw", "MB/s"), ("fps", "frames/s"),
                           ("frames", "frames"), ("late", "frames"), ("dropped", "frames"),
                           ("longest_late_run", "frames"), ("verdict", "")):
            column = f"streams.{sub}.{name}" + (f" ({unit})" if unit else "")
            assert row[column] == str(stream[sub][name])
        assert float(row[f"streams.{sub}.lateness_p99 (us)"]) == stream[sub]["lateness_p99"] / 1000


@pytest.mark.parametrize("action", ["-memStreams", "-streams"])
def test_sixteen_streams_on_one_loop_share_one_timer_and_file_streams_one_ring(action):
    tests = [build(f"-p 16 {action} w 1 64 62.5 0 0.05 1", row=row) for row in range(16)]

    async def go():
        for test in tests:
            await test.setup()
        try:
            assert len({id(t.timer) for t in tests}) == 1
            if action == "-streams" and NO_URING is None:
                assert {t.tracks.engine.name for t in tests} == {"io_uring"}
                assert len({id(t.tracks.engine) for t in tests}) == 1
        finally:
            for test in tests:
                await test.close()
        assert tests[0].timer.fd < 0                  # the last close closed it
    asyncio.run(go())
