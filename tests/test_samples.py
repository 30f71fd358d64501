"""Samples (-sample, -sa) from the Meter to the samples table, and the other detail printed after
the run: -checkpoint's phase durations and -v / -vl."""
from __future__ import annotations

import contextlib
import os
import re
import time

from torque_async import cmdline, report
from torque_async.meter import Limit, Meter
from torque_async.results import DONE, FAILED, MAX_SAMPLES, MEASURED, RUNNING, Results
from torque_async.stats import BATCH

from conftest import run_cli, table
from test_report import MS, record

KB64 = 64 * 1024


@contextlib.contextmanager
def scratch_results(rows: int):
    """A results segment of `rows` rows of this test's own, removed afterwards."""
    res = Results.create(f"torque-async-test-{os.getpid():x}", rows)
    try:
        yield res
    finally:
        res.release()
        res.shm.unlink()


def sampled(samples, transfers, start=0, finish=None, size=KB64, **kw):
    rec = record(0, start, 0, transfers, size, samples=tuple(samples), **kw)
    return rec if finish is None else record(0, start, finish * MS - start * MS, transfers, size,
                                            samples=tuple(samples), **kw)


def test_each_interval_counts_only_its_own_transfers_and_time():
    # 256 transfers in the first 10 ms, 256 more in the next 30 ms: 1600 then 533 MB/s.
    rec = sampled([(10 * MS, 256), (40 * MS, 512)], 512, finish=40)
    s0, s1 = report.sample_intervals(rec, 0)
    assert (s0.start, s0.end, s0.transfers) == (0, 10 * MS, 256)
    assert (s1.start, s1.end, s1.transfers) == (10 * MS, 40 * MS, 256)
    assert round(s0.bw, 1) == 1600.0 and round(s1.bw, 1) == 533.3   # per interval, not cumulative


def test_transfers_after_the_last_sample_form_a_last_interval_ending_at_the_finish():
    rec = sampled([(10 * MS, 30), (20 * MS, 60), (30 * MS, 90)], 100, finish=34)
    spans = report.sample_intervals(rec, 0)
    assert [s.transfers for s in spans] == [30, 30, 30, 10]
    assert spans[-1].start == 30 * MS and spans[-1].end == 34 * MS
    assert sum(s.transfers for s in spans) == rec.transfers


def test_times_are_since_time_zero():
    rec = sampled([(1005 * MS, 8)], 8, start=1000, finish=1005)
    (span,) = report.sample_intervals(rec, 990 * MS)
    assert (span.start, span.end) == (10 * MS, 15 * MS)


def test_sampling_stops_at_the_limit_and_the_table_says_so():
    samples = [((k + 1) * MS, k + 1) for k in range(MAX_SAMPLES)]
    rec = sampled(samples, 2048, finish=3000)
    assert report.sampling_cut(rec)
    spans = report.sample_intervals(rec, 0)
    assert len(spans) == MAX_SAMPLES and sum(s.transfers for s in spans) == MAX_SAMPLES
    lines = report.sample_lines((rec,), cmdline.parse(["-sample", "0", "-bzero"]).procs(), 0)
    assert lines[-1] == "proc 0: sampling stopped at 1024 samples, after transfer 1024 of 2048"


def test_the_table_has_every_column_and_sa_anywhere_keeps_only_bandwidth():
    rec0 = sampled([(10 * MS, 256), (40 * MS, 512)], 512, finish=40)
    rec1 = record(1, 0, 40 * MS, 10, KB64, samples=((20 * MS, 5), (40 * MS, 10)))
    procs = cmdline.parse("-sample 255 -bzero -sample 4 -load".split()).procs()
    full = report.sample_lines((rec0, rec1), procs, 0)
    assert full[:2] == ["Samples (ms since the start; bandwidth over each interval alone)",
                        report.SAMPLES_HEADER]
    assert full[2:] == ["0, 0, 0.000, 10.000, 256, 1600.0, Bzero",
                        "0, 1, 10.000, 40.000, 256, 533.3, Bzero",
                        "1, 0, 0.000, 20.000, 5, 15.6, Load",
                        "1, 1, 20.000, 40.000, 5, 15.6, Load"]
    # -sa on the first group applies to every sampled test, as the man page says.
    procs = cmdline.parse("-sa 255 -bzero -sample 4 -load".split()).procs()
    bw_only = report.sample_lines((rec0, rec1), procs, 0)
    assert bw_only[:2] == ["Samples (bandwidth over each interval alone)",  # (no ms columns)
                           report.SA_HEADER]
    assert bw_only[2:] == ["0, 0, 1600.0, Bzero", "0, 1, 533.3, Bzero", "1, 0, 15.6, Load",
                           "1, 1, 15.6, Load"]


def test_no_samples_no_table():
    rec = record(0, 0, MS, 10, KB64)
    assert report.sample_lines((rec,), cmdline.parse(["-bzero"]).procs(), 0) == []
    # -sample k over fewer than k + 1 transfers: it printed nothing, and no reason
    assert report.sample_lines((rec,), cmdline.parse("-sample 99 -bzero".split()).procs(), 0) \
        == ["proc 0: -sample 99: no sample, as its 10 measured transfers are fewer than 100"]


def test_the_meter_stamps_every_k_plus_1_transfers_and_stops_at_1024():
    with scratch_results(2) as res:
        every3, every1 = Meter(res, 0, 2, False), Meter(res, 1, 0, False)
        for k in range(1, 3001):
            every3.record(10, 1000 + k)
            every1.record(10, 1000 + k)
        every3.publish(1, 1)
        every1.publish(1, 1)
        rec3, rec1 = res.snapshot()
        assert rec3.samples[:3] == ((1003, 3), (1006, 6), (1009, 9)) and len(rec3.samples) == 1000
        assert len(rec1.samples) == MAX_SAMPLES and rec1.samples[-1] == (1000 + 1024, 1024)


def test_due_is_the_first_count_whose_record_the_meter_must_take_itself():
    """io/batch.py records counts below Meter.due() inline: the next sample, the count, or the
    latency batch full, whichever comes first; past the last sample only the others count."""
    with scratch_results(3) as res:
        sampled = Meter(res, 0, 99, False, Limit(count=5000))
        plain = Meter(res, 1, None, False, Limit(count=700))
        assert (sampled.due(), plain.due()) == (100, 700)
        for k in range(1, 101):
            sampled.record(10, k)
        assert sampled.due() == 200                        # 100 sampled: the next at 200
        for k in range(101, 1001):
            sampled.record(10, k)
        assert sampled.lat.held == 1000 % BATCH and sampled.due() == 1024   # the batch is full
        late = Meter(res, 2, 0, False, Limit(count=5000))
        for k in range(1, MAX_SAMPLES + 1):
            late.record(10, k)
        assert late.due() == MAX_SAMPLES + BATCH - MAX_SAMPLES % BATCH   # no sample after the
                                                                         # last: the batch's


def test_a_last_stamp_closes_the_samples_at_a_given_time_once_and_within_the_limit():
    """A stream's samples end at its last completion (its Finish is its last period's end)."""
    with scratch_results(2) as res:
        every3, full = Meter(res, 0, 2, False), Meter(res, 1, 0, False)
        for k in range(1, 6):
            every3.record(10, 1000 + k)
        every3.stamp(1005)
        every3.stamp(1006)                           # nothing since: no second stamp
        for k in range(1, MAX_SAMPLES + 3):
            full.record(10, k)
        full.stamp(5000)                             # no room
        every3.publish(1, 1)
        full.publish(1, 1)
        rec3, recf = res.snapshot()
        assert rec3.samples == ((1003, 3), (1005, 5))
        assert len(recf.samples) == MAX_SAMPLES and recf.samples[-1] == (MAX_SAMPLES, MAX_SAMPLES)


def test_no_measured_transfer_stores_0_as_the_latency_min_and_max():
    with scratch_results(2) as res:
        Meter(res, 0, None, False).publish(1, 1)                # published, nothing measured
        published, untouched = res.snapshot()
        for rec in (published, untouched):
            assert (rec.lat_count, rec.lat_min, rec.lat_max, rec.lat_sum) == (0, 0, 0, 0)


def test_keep_going_holds_while_another_row_measures_and_drops_rows_as_they_finish():
    with scratch_results(4) as res:
        states = res.rows["state"]
        states[:] = RUNNING
        meter, plain = Meter(res, 1, None, slow=True), Meter(res, 1, None, slow=False)
        assert meter.waiting == [0, 2, 3] and meter.keep_going() and not plain.keep_going()
        states[3], states[0] = MEASURED, DONE
        assert meter.keep_going() and meter.waiting == [0, 2]   # dropped from the end only
        states[2] = FAILED                                       # failed: measures no more
        assert not meter.keep_going() and meter.waiting == []   # its own row (1) does not count
        states[[0, 2, 3]] = RUNNING                              # never happens: not read again
        assert not meter.keep_going()
        res.header["stop"] = 1
        assert not Meter(res, 0, None, slow=True).keep_going()  # a stopped run: stop


def samples_table(out: str) -> list[list[str]]:
    return table(out, "proc,Sample,")


def test_a_sampled_run_s_samples_add_up_to_its_transfers_and_tile_its_interval():
    r = run_cli("-smkey", "0x7601", "-n", "2048", "-i", "1", "-KB", "64", "-sample", "255",
                "-bzero", "-n", "100", "-i", "1", "-KB", "256", "-sample", "29", "-load")
    assert r.returncode == 0, r.stderr
    main = {row[0]: row for row in table(r.stdout)}
    rows = samples_table(r.stdout)
    for proc, counts in (("0", [256] * 8), ("1", [30, 30, 30, 10])):
        mine = [row for row in rows if row[0] == proc]
        assert [int(row[4]) for row in mine] == counts
        assert sum(counts) == int(main[proc][4])
        starts, ends = [float(row[2]) for row in mine], [float(row[3]) for row in mine]
        assert starts[1:] == ends[:-1]                               # back to back
        assert int(main[proc][1]) <= starts[0] and ends[-1] < int(main[proc][2]) + 1
        size = KB64 if proc == "0" else 4 * KB64
        for row, start, end in zip(mine, starts, ends):
            if end - start >= 0.01:             # times printed to 1 us: each end +-0.5 us
                bw = int(row[4]) * size / 2**20 / ((end - start) / 1000)
                assert abs(float(row[5]) - bw) <= bw * 0.001 / (end - start - 0.001) + 0.1


def test_sa_shows_only_the_bandwidth_columns():
    r = run_cli("-smkey", "0x7602", "-nh", "-n", "64", "-i", "1", "-KB", "64", "-sa", "15",
                "-bzero")
    assert r.returncode == 0, r.stderr
    assert report.SA_HEADER in r.stdout and report.SAMPLES_HEADER not in r.stdout
    rows = samples_table(r.stdout)
    assert [row[:2] for row in rows] == [["0", str(j)] for j in range(4)]
    assert all(len(row) == 4 and float(row[2]) > 0 and row[3] == "Bzero" for row in rows)


# -checkpoint and -v / -vl --------------------------------------------------------------------

def test_phase_durations_are_the_gaps_between_phase_marks():
    rec = record(0, 0, MS, 1, KB64, phase=(1000 * MS, 1500 * MS, 2000 * MS, 5000 * MS, 5200 * MS))
    assert report.phase_durations(rec) == {"set-up": 500.0, "barrier wait": 500.0,
                                           "test": 3000.0, "wind-down": 200.0}
    cut = record(0, 0, MS, 1, KB64, phase=(1000 * MS, 1500 * MS, 0, 0, 5200 * MS))
    assert report.phase_durations(cut) == {"set-up": 500.0}          # steps not reached: out


def test_checkpoint_prints_durations_whose_test_step_is_the_measured_time():
    began = time.monotonic()
    r = run_cli("-smkey", "0x7603", "-checkpoint", "-n", "40", "-i", "1", "-MB", "1", "-bzero")
    wall_ms = (time.monotonic() - began) * 1000
    assert r.returncode == 0, r.stderr
    (row,) = table(r.stdout)
    marks = next(ln for ln in r.stdout.splitlines() if ln.startswith("checkpoint proc 0"))
    for phase in ("spawned", "set up", "released", "measured", "done"):
        assert phase in marks
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("checkpoint proc 0 durations"))
    steps = {k: float(v)
             for k, v in (step.rsplit(" ", 1) for step in line.split(": ")[1].split(", "))}
    assert set(steps) == {"set-up", "barrier wait", "test", "wind-down"}
    # the measured span (Diff, whole ms) lies inside the test step, which begins at the
    # barrier's release: a preemption before the first transfer widens the step, never Diff
    assert int(row[3]) - 1 <= steps["test"] <= wall_ms
    report_ms = re.search(r"^checkpoint report \(ms\): ([\d.]+)$", r.stdout, re.M)
    assert report_ms and float(report_ms[1]) <= wall_ms           # a part of the run's time


def test_verbose_levels_add_detail_after_the_run():
    args = ("-smkey", "0x7604", "-nh", "-n", "5", "-i", "1", "-KB", "64", "-bzero")
    quiet = run_cli(*args)
    v1, v2, v3 = (run_cli("-vl", str(n), *args) for n in (1, 2, 3))
    assert all(r.returncode == 0 for r in (quiet, v1, v2, v3)), v3.stderr
    assert "proc 0 (-bzero, group 0, process 0)" not in quiet.stdout
    assert re.search(r"^proc 0 \(-bzero, group 0, process 0\): pid \d+, done, 5 transfers "
                     r"\(\+0 unmeasured\), 327680 bytes, 327680 system bytes, 0 samples; set-up",
                     v1.stdout, re.M)
    assert "latency histogram" not in v1.stdout
    hist = next(ln for ln in v2.stdout.splitlines() if ln.startswith("proc 0 latency histogram"))
    assert sum(int(n) for n in re.findall(r"[\d.]+ (\d+)", hist.split(": ", 1)[1])) == 5
    # -vl 3: every transfer time-stamped (no -sample given) and listed after the run.
    assert [row[4] for row in samples_table(v3.stdout)] == ["1"] * 5
    assert "5 samples" in v3.stdout and "proc,Sample," not in v2.stdout
