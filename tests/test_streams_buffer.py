"""-bufferFrames: a late frame is lost only when the stream's buffer overflowed (later than its
deadline by more than N periods); the late frames the buffer held are counted apart."""
from __future__ import annotations

import asyncio
import json

import pytest

from torque_async import cmdline, report
from torque_async.streams.pipeline import Lateness

from conftest import run_cli
from test_streams import virtual_pipeline
from test_streams_video import Slow, figures


@pytest.mark.parametrize("buffer, lost, held", [(0, 2, 0), (1, 1, 1), (2, 0, 2), (5, 0, 2)])
def test_a_frame_late_within_n_periods_is_held_and_one_beyond_is_lost(buffer, lost, held):
    # 1 ms periods; frame 3 takes 2.5 ms: it completes 1.5 periods after its deadline, frame 4
    # (started then) 0.6 of a period after its own; the others are on time
    g, pipe, clock, trace = virtual_pipeline(
        "w", 0, 64, 62.5, 0.01, lambda k: 2_500_000 if k == 3 else 100_000)
    pipe.buffer = buffer
    asyncio.run(pipe.run(g.frames))
    late = pipe.lateness[0].settle()
    assert [t1 - pipe.pacer.release(k + 1) for _, k, _, t1 in trace][3:5] == [1_500_000, 600_000]
    assert (late.count, late.late, late.buffered) == (10, lost, held)
    assert late.longest == min(lost, 2)


def test_the_buffer_holds_a_frame_exactly_n_periods_late_and_loses_one_ns_more():
    late = Lateness(tolerance=1000)
    for ns, allowance in ((1000, 0), (1001, 0), (3000, 2000), (3001, 2000), (0, 2000)):
        late.add(ns, allowance)
    assert (late.late, late.buffered) == (2, 1)        # 1001 beyond 0; 3001 beyond 2000 + 1000
    assert late.settle().count == 5


def test_default_zero_keeps_every_late_frame_lost():
    """Without -bufferFrames a frame late beyond -lateUs is a miss, as before."""
    g, pipe, clock, trace = virtual_pipeline(
        "w", 0, 64, 62.5, 0.01, lambda k: 2_500_000 if k == 3 else 100_000)
    assert pipe.buffer == 0
    asyncio.run(pipe.run(g.frames))
    assert (pipe.lateness[0].late, pipe.lateness[0].buffered) == (2, 0)
    assert cmdline.parse("-memStreams w 0 64 62.5 0 1 1".split()).groups[0].local.bufferFrames == 0


def test_a_stream_whose_buffer_holds_every_late_frame_is_held_and_says_how_many():
    # each transfer takes at least 3 ms of a 1 ms period: every frame is late, by 2 (k + 1) ms
    # and more, far within 100 000 periods
    (sub,), _ = figures("-fps 1000 -bufferFrames 100000 -memStreams w 0 64 0 0 0.05 1",
                        lambda t: Slow(t, 0.003))
    assert (sub.verdict, sub.frames, sub.late, sub.late_in_buffer) == (report.HELD, 50, 0, 50)
    assert sub.buffer_frames == 100000 and sub.lateness_max > 0
    (sub,), _ = figures("-fps 1000 -memStreams w 0 64 0 0 0.05 1", lambda t: Slow(t, 0.003))
    assert (sub.verdict, sub.late, sub.late_in_buffer, sub.buffer_frames) == \
        (report.MISSED, 50, 0, 0)


def test_buffer_frames_all_is_the_default_of_every_stream_that_sets_none():
    plan = cmdline.parse("-bufferFramesAll 3 -memStreams w 0 64 62.5 0 1 1 -bufferFrames 0 "
                         "-memStreams w 0 64 62.5 0 1 1 -bufferFrames 7 -memStreams w 0 64 62.5 0 "
                         "1 1 -load".split())
    assert [g.local.bufferFrames for g in plan.groups] == [3, 0, 7, None]


@pytest.mark.parametrize("args, message", [
    (["-bufferFrames", "-1", "-memStreams", "w", "0", "64", "62.5", "0", "1", "1"],
     "-bufferFrames N: -1 is out of range (0..1000000)"),
    (["-bufferFramesAll", "-2", "-load"], "-bufferFramesAll N: -2 is out of range (0..1000000)"),
    (["-bufferFrames", "2", "-load"], "-bufferFrames"),
])
def test_bad_buffer_frames_is_one_line_and_exit_2(args, message):
    done = run_cli("-quit", *args)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_quit_shows_each_streams_frame_size_rate_bandwidth_and_buffer():
    done = run_cli("-quit", "-bufferFramesAll", "2", "-bufferFrames", "3", "-frame", "1920x1080",
                   "-pixfmt", "uyvy422", "-fps", "59.94", "-streams", "w", "2", "0", "0", "0", "2",
                   "64", "-memStreams", "rrw", "2", "1024", "100", "0", "1", "64")
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("  stream: ")]
    assert lines == [
        "  stream: w, 1 x 120 1920x1080 uyvy422 frames of 4147200 bytes at 59.940 fps (237.1 "
        "MB/s, every 16.683 ms) per sub-stream; buffer 3 frames (50.050 ms)",
        "  stream: rrw, 3 x 100 frames of 1024 KB at 100.000 fps (100.0 MB/s, every 10.000 ms) "
        "per sub-stream; buffer 2 frames (20.000 ms)"]


def test_drop_late_drops_only_what_the_buffer_could_not_hold():
    # 1 ms periods; frame 3 takes 3.5 ms: frame 4 could start at 6.5 ms, 1.5 periods past its
    # deadline. Without a buffer it is dropped (a period past); a 1-frame buffer still holds it
    # (it is dropped from 2 periods past): it moves, lost at 1.6 ms late, and frame 5 (0.7 ms
    # late) is held by the buffer
    for buffer, moved, dropped, lost, held in ((0, 9, {4}, 2, 0), (1, 10, set(), 2, 1)):
        g, pipe, clock, trace = virtual_pipeline(
            "w", 0, 64, 62.5, 0.01, lambda k: 3_500_000 if k == 3 else 100_000)
        pipe.drop, pipe.buffer = True, buffer
        asyncio.run(pipe.run(g.frames))
        late = pipe.lateness[0].settle()
        assert (len(trace), pipe.frames.dropped[0], late.late, late.buffered) == \
            (moved, dropped, lost, held)


def test_a_run_records_when_each_test_ran_and_the_buffer_in_its_json():
    """A load that measured 8 transfers then ran on unmeasured (-slow) beside a 0.3 s stream:
    its record says so, and the overlap line names it."""
    done = run_cli("-smkey", "0x7A4B", "-json", "-", "-n", "4", "-i", "2", "-load",
                   "-bufferFrames", "2", "-memStreams", "w", "0", "64", "62.5", "0", "0.3", "1")
    assert done.returncode == 0, done.stderr
    load, stream = json.loads(done.stdout)["tests"]
    assert stream["streams"]["sub0"]["buffer_frames"] == 2
    held = stream["streams"]["sub0"]["late_in_buffer"]
    assert held == stream["record"]["subs"][0]["late_in_buffer"] >= 0
    ran, rec = load["record"]["ran"], load["record"]
    assert rec["extra_transfers"] > 0 and ran[0] <= rec["start"] and ran[1] > rec["finish"]
    assert ran[1] >= stream["record"]["start"]            # it was still running beside the stream
    line = next(ln for ln in done.stderr.splitlines() if "ran together" in ln)
    assert "unmeasured in it: proc 0 (" in line, line
