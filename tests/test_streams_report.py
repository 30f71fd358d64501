"""The stream and cyclic report lines are pure: known records in, known lines out."""
from __future__ import annotations

from dataclasses import replace

import pytest

from torque_async import cmdline, report
from torque_async.results import SubStream
from torque_async.units import KB, MB

from test_report import INFO, MS, hist_of, record


def sub(transfers: int, lateness: list[int]) -> SubStream:
    hist = hist_of(*lateness, *[0] * (transfers - len(lateness)))
    late = [ns for ns in lateness if ns]
    return SubStream(transfers, len(late), 2 if late else 0, 0 if len(lateness) < transfers
                     else min(lateness), max(lateness, default=0), sum(lateness), hist)


def test_stream_lines_give_each_sub_stream_its_target_bandwidth_and_lateness():
    plan = cmdline.parse("-sample 99 -memStreams rw 2 1024 100 0 2 64 -seed 1".split())
    rec = record(0, 0, 2000 * MS, 400, 1024 * KB, sys_factor=2,
                 subs=(sub(200, []), sub(200, [5000, 12000, 400_000])),
                 samples=((1000 * MS, 100), (2000 * MS, 300)))
    lines = report.stream_lines((rec,), plan.procs())
    assert lines == [               # p99: the 198th of 200 is 5000 ns, bucket top 5119
        "Streams: lateness = completion - deadline (us, 0 when on time); a frame is late "
        "more than -lateUs 0 us after its deadline, and lost when later than its stream's buffer "
        "holds (Buffer frames: that many periods more; 0: every late frame is lost); HELD: no "
        "frame lost or dropped",
        report.STREAM_HEADER,
        "0, 0 read t0, 100.0, 100.000, 100.0, 100.000, 200, 0, 0, 0, 0, 0, 0.0, 0.0, 0.0, HELD, "
        "MemStreams rw",
        "0, 1 write t0, 100.0, 100.000, 100.0, 100.000, 200, 0, 3, 0, 0, 2, 0.0, 5.1, 400.0, "
        "MISSED, MemStreams rw", "",
        "streams: 0 held, 1 missed (sub-streams: 1 held, 1 missed)"]
    # a buffer of 3 frames that held every late frame: they are counted apart, the stream held
    buffered = cmdline.parse("-bufferFrames 3 -memStreams w 2 1024 100 0 2 64".split())
    held = replace(sub(200, [5000, 12000]), late=0, late_run=0, late_in_buffer=2)
    lines = report.stream_lines((record(0, 0, 2000 * MS, 200, 1024 * KB, subs=(held,)),),
                                buffered.procs())
    assert lines[2].startswith("0, 0 write t0, 100.0, 100.000, 100.0, 100.000, 200, 3, 0, 2, "
                               "0, 0, ") and lines[2].endswith(", HELD, MemStreams w")
    assert lines[-1] == "streams: 1 held, 0 missed (sub-streams: 1 held, 0 missed)"
    tolerant = cmdline.parse("-lateUs 2000 -memStreams rw 2 1024 100 0 2 64".split())
    assert "more than -lateUs 2000 us after its deadline" in \
        report.stream_lines((rec,), tolerant.procs())[0]     # (it said "beyond -lateUs")
    mixed = cmdline.parse("-lateUs 2000 -memStreams rw 2 1024 100 0 2 64 -memStreams rw 2 1024 100 "
                          "0 2 64".split())
    other = replace(rec, row=1)
    assert "more than -lateUs 0 us (proc 1), 2000 us (proc 0) after its deadline" in \
        report.stream_lines((rec, other), mixed.procs())[0]   # (it said "-lateUs 0, 2000 us")
    text = "\n".join(report.render(plan, (rec,), plan.procs(), INFO, "today"))
    # -sample: the stream's intervals are in the one samples table, per interval
    assert "0, 0, 0.000, 1000.000, 100, 100.0, MemStreams" in text
    assert "0, 1, 1000.000, 2000.000, 200, 200.0, MemStreams" in text
    assert "number of transactions" not in text and "Number of processes = 1" in text
    assert text.index("Streams: lateness") < text.index("BW:")


def test_a_sub_streams_rate_is_over_the_time_its_frames_span_not_the_processes():
    """200 frames of 10 ms that held span 2 s (SubStream.elapsed), though the process measured
    1.99 s (first release to last completion): the rate reads 100 fps, not 100.503."""
    plan = cmdline.parse("-memStreams w 2 1024 100 0 2 64".split())
    held = replace(sub(200, []), elapsed=2000 * MS)
    rec = record(0, 0, 1990 * MS, 200, 1024 * KB, sys_factor=2, subs=(held,))
    (figures,) = report.sub_stream_figures(rec, plan.procs()[0])
    assert (figures.fps, figures.bw) == (100.0, 100.0) == (figures.target_fps, figures.target_bw)
    unknown = replace(rec, subs=(replace(held, elapsed=0),))    # an older record: its own time
    assert report.sub_stream_figures(unknown, plan.procs()[0])[0].fps == pytest.approx(200 / 1.99)


def test_a_stream_stopped_before_its_first_frame_is_not_run_not_held():
    """It read HELD at 0 MB/s: nothing was measured, so nothing held (nor missed)."""
    plan = cmdline.parse("-memStreams rw 2 1024 100 2 1 64".split())
    none = SubStream(0, 0, 0, 0, 0, 0, ())
    rec = record(0, 0, 0, 0, 1024 * KB, sys_factor=2, subs=(none, none))
    lines = report.stream_lines((rec,), plan.procs())
    assert [ln.split(", ")[15] for ln in lines[2:4]] == ["NOT RUN", "NOT RUN"]
    assert lines[-1] == "streams: 0 held, 0 missed, 1 not run (sub-streams: 0 held, 0 missed, " \
                        "2 not run)"
    assert report.verdict_of(["HELD", "NOT RUN"]) == "NOT RUN"      # held nothing whole
    assert report.verdict_of(["MISSED", "NOT RUN"]) == "MISSED"
    assert report.verdict_of(["HELD", "HELD"]) == "HELD"
    from torque_async import export
    assert export.streams(rec, plan.procs()[0], 0)["verdict"] == "NOT RUN"


def test_cyclic_line_is_cyclictests_with_p99():
    plan = cmdline.parse("-cyclic 1000 -seed 1".split())
    rec = replace(record(0, 0, 4 * MS, 4, 0, pid=42), lat_min=5000, lat_max=90_000,
                  lat_sum=108_000, lat_count=4, hist=hist_of(5000, 6000, 7000, 90_000),
                  last_lat=7000)
    assert report.cyclic_lines((rec,), plan.procs()) == [
        "T: 0 (42) I:1000 C: 4 Min: 5 Act: 7 Avg: 27 Max: 90 p99: 90 (us)"]


def test_fail_late_counts_every_repetition_not_only_the_first(monkeypatch, capsys, tmp_path):
    """-failLate -repeat 3 with a stream that missed in repetition 2 only: exit 0, unsaid (the
    verdicts were the first repetition's)."""
    from torque_async import orchestrator, runs
    from conftest import execute
    ran = []

    def fake_run(p, linesize, meet=None):
        ran.append(1)
        late = [5_000_000] if len(ran) == 2 else []
        return orchestrator.Outcome((record(0, 0, 1000 * MS, 200, 1024 * KB, sys_factor=2,
                                            subs=(sub(200, late),)),), ())
    monkeypatch.setattr(runs.orchestrator, "run", fake_run)
    monkeypatch.chdir(tmp_path)
    code, out, err = execute(capsys, "-failLate", "-repeat", "3", "-memStreams", "w", "2",
                             "1024", "200", "0", "1", "64")
    assert "streams: 1 held, 0 missed" in out                   # the table is repetition 1's
    assert code == 3 and err.splitlines()[-1] == \
        "torque-async: -failLate: a stream missed its rate in repetition 2 of 3 (exit 3)"


def test_the_overlap_line_spans_the_time_all_ran_and_names_the_tests_that_ran_unmeasured():
    """A Triad measured 9-1074 ms and kept running (-slow) beside a 5 s stream: the line said
    'All 2 tests ran together from 9 ms to 1074 ms' as if it had stopped there."""
    plan = cmdline.parse("-Striad -memStreams w 0 64 62.5 0 5 1".split())
    triad = record(0, 9, 1065 * MS, 10, MB, ran=(9 * MS, 5002 * MS), extra_transfers=40)
    stream = record(1, 9, 4992 * MS, 5000, 64 * KB, ran=(9 * MS, 5001 * MS))
    assert report.overlap_line(plan, (triad, stream), 0) == (
        "All 2 tests ran together from 9 ms to 5001 ms (4992 ms), measured or not; unmeasured "
        f"in it: proc 0 ({report.test_label(plan.groups[0])}) 3927 ms; all measured together "
        "from 9 ms to 1074 ms (1065 ms)")
    # a ramp before the measured interval is running too; with none unmeasured, the line as it was
    ramped = replace(triad, ran=(2 * MS, 1074 * MS), extra_transfers=0)
    short = replace(stream, finish=1074 * MS, ran=(0, 0))
    assert report.overlap_line(plan, (ramped, short), 0) == \
        "All 2 tests ran together from 9 ms to 1074 ms (1065 ms)"
    early = replace(ramped, start=500 * MS)            # its ramp ran from 2 ms: unmeasured 491 ms
    assert report.overlap_line(plan, (early, short), 0).startswith(
        "All 2 tests ran together from 9 ms to 1074 ms (1065 ms), measured or not; unmeasured in "
        f"it: proc 0 ({report.test_label(plan.groups[0])}) 491 ms; all measured together from "
        "500 ms")
    # measured apart, but running together (-slow): the warning says when they did run together
    apart = replace(triad, finish=10 * MS)
    late = replace(stream, start=57 * MS, finish=1065 * MS, ran=(57 * MS, 1065 * MS))
    assert report.overlap_line(plan, (apart, late), 0).endswith(
        "lengthen the short test or start the late one sooner; All 2 tests ran together from "
        f"57 ms to 1065 ms (1008 ms), measured or not; unmeasured in it: proc 0 "
        f"({report.test_label(plan.groups[0])}) 1008 ms")


def test_the_overlap_line_names_many_clients_that_ran_unmeasured_as_one_range():
    """100 -web clients each ran unmeasured a few ms (-slow): the line named all 100, one by one,
    in a line of thousands of characters; now a kind with more than 3 is one range, a kind with
    3 or fewer keeps its names."""
    plan = cmdline.parse("-p 5 -load -p 2 -Striad".split())
    recs = tuple(record(row, 10, (1000 - row) * MS, 10, MB, ran=(10 * MS, 1020 * MS))
                 for row in range(7))                            # unmeasured: 10 + row ms
    load, triad = (report.test_label(g) for g in plan.groups)
    assert report.overlap_line(plan, recs, 0) == (
        "All 7 tests ran together from 10 ms to 1020 ms (1010 ms), measured or not; unmeasured "
        f"in it: procs 0-4 ({load}) 10 to 14 ms, proc 5 ({triad}) 15 ms, proc 6 ({triad}) 16 "
        "ms; all measured together from 10 ms to 1004 ms (994 ms)")


def test_a_wired_stream_s_own_and_inherited_lateness_are_apart_and_its_verdict_is_its_own():
    """-from: the stream table (Verdict, Lost, lateness) is the stage's own; the Stages table
    gives what it inherited; a stream not wired has no Stages line."""
    plan = cmdline.parse("-memStreams w 2 1024 100 0 2 64 -from 0 -memStreams rw 2 1024 100 0 2 "
                         "64".split())
    capture = record(0, 0, 2000 * MS, 200, 1024 * KB, subs=(sub(200, [3_000_000] * 3),))
    inherited = replace(sub(200, []), up_late=3, up_lost=2, up_max=2_500_000)
    lapped = replace(sub(200, [40_000]), lapped=1, up_late=3, up_lost=2, up_max=2_600_000)
    process = record(1, 0, 2000 * MS, 400, 1024 * KB, subs=(inherited, lapped))
    lines = report.stream_lines((capture, process), plan.procs())
    assert lines[2].endswith(", MISSED, MemStreams w")                   # the capture's miss
    assert lines[3].endswith(", HELD, MemStreams rw")                    # inherited: held
    assert lines[4].endswith(", MISSED, MemStreams rw")                  # lapped: its own
    stages = lines[lines.index(report.STAGE_HEADER) + 1:]
    assert stages[:2] == ["1, 0 read t0, 0, 0, 0, 0.0, 3, 2, 2500.0, MemStreams rw",
                          "1, 1 write t0, 0, 1, 1, 40.0, 3, 2, 2600.0, MemStreams rw"]
    alone = cmdline.parse("-memStreams w 2 1024 100 0 2 64".split())
    assert not any("Stages" in line for line in report.stream_lines((capture,), alone.procs()))
