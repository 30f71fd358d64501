"""-t and -ramp (the Meter's limit), -repeat and -baseline (runs.py, figures.py): exact counts
from real runs, and the pure parts (the limit's predicate, sorting and formatting) from
constructed values."""
from __future__ import annotations

import csv
import io
import json
import os
import statistics

import pytest

from torque_async import cmdline, figures, orchestrator, report, runs
from torque_async.meter import Limit, Meter
from torque_async.results import Results
from torque_async.stats import bucket
from torque_async.units import MB

from conftest import execute, run_cli
from test_export import VALIDATOR
from test_report import MS, record


@pytest.fixture
def results():
    res = Results.create(f"torque-async-test-runs-{os.getpid():x}", 1)
    yield res
    res.release()
    res.shm.unlink()


def test_a_count_limit_allows_exactly_n_x_i_transfers(results):
    meter = Meter(results, 0, None, False, Limit.of(cmdline.parse("-n 3 -i 2 -load".split())
                                                     .groups[0].local))
    t = meter.begin()
    assert [meter.more(k, t + 10**15) for k in range(8)] == [True] * 6 + [False] * 2


def test_a_deadline_refuses_from_the_first_transfer_past_it_and_that_fixes_the_count(results):
    meter = Meter(results, 0, None, False, Limit(runtime_ns=5 * MS))
    t = meter.begin()
    assert meter.deadline == t + 5 * MS and meter.more(0, t) and meter.more(6, t + 5 * MS - 1)
    assert not meter.more(7, t + 5 * MS) and meter.total == 7
    assert not meter.more(8, t)             # later numbers stay refused: 0 .. 6 were measured


@pytest.mark.parametrize("limit, made, stop, whole", [
    (Limit(count=3), 3, None, True),
    (Limit(count=3), 3, 1, True),          # the last one in flight at the stop, then made
    (Limit(count=3), 2, 1, False),         # idle (-T) at the stop: its count not made
    (Limit(runtime_ns=5 * MS), 2, None, True),       # more() refused one at the deadline
    (Limit(runtime_ns=5 * MS), 2, 5 * MS, True),     # the stop came after the deadline
    (Limit(runtime_ns=5 * MS), 2, 5 * MS - 1, False)])
def test_a_measured_part_is_whole_when_it_reached_its_limit_before_any_stop(results, limit, made,
                                                                          stop, whole):
    """Cut short or not was judged by the last transfer's end against the stop: an idle test
    read as whole, one whose last transfer completed after the stop as cut."""
    meter = Meter(results, 0, None, False, limit)
    t = meter.begin()
    for k in range(made):
        assert meter.more(k, t)
        meter.record(1, t)
    if stop is None:
        assert not meter.more(made, t + 5 * MS)            # the limit refuses the next
    else:
        results.header["stop"] = t + stop
    meter.end(t)
    meter.publish(0, 0)
    assert results.snapshot()[0].whole is whole


def test_the_ramp_is_part_of_t_and_comes_before_the_measured_part():
    local = cmdline.parse("-t 2 -ramp 0.5 -load".split()).groups[0].local
    assert Limit.of(local) == Limit(runtime_ns=1_500_000_000, ramp_ns=500_000_000,
                                    count=Limit().count)


def test_global_times_fill_the_groups_that_set_none_but_not_streams():
    plan = cmdline.parse("-tAll 3 -rampAll 1 -t 5 -load -ramp 0 -bzero "
                         "-streams r 2 64 10 0 1 16".split())
    load, bzero, stream = (g.local for g in plan.groups)
    assert (load.t, load.ramp, bzero.t, bzero.ramp) == (5.0, 1.0, 3.0, 0.0)
    assert (stream.t, stream.ramp) == (None, None)


def measured_exactly(test) -> dict:
    rec = test["record"]
    assert test["state"] == "done"
    assert rec["transfers"] == rec["lat_count"] == test["table"]["xfers"] > 0
    if test["samples"]["every"]:
        assert sum(s["transfers"] for s in test["samples"]["intervals"]) == rec["transfers"]
    return rec


def test_t_measures_for_its_time_and_counts_every_transfer_it_measured(tmp_path):
    r = run_cli("-smkey", "0x7D61", "-json", "t.json",
                "-t", "1", "-ramp", "0.3", "-MB", "1", "-sample", "63", "-load",
                "-t", "0.8", "-KB", "4", "-mfileMB", "8", "-aio", "4",
                "-n", "20", "-i", "1", "-ramp", "0.2", "-KB", "64", "-bzero",
                "-t", "0.5", "-cyclic", "1000")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    VALIDATOR.validate(doc)
    load, aio, bzero, cyclic = doc["tests"]
    for test, runtime in ((load, 0.7e9), (aio, 0.8e9), (cyclic, 0.5e9)):
        rec = measured_exactly(test)
        elapsed = rec["finish"] - rec["start"]
        assert 0.95 * runtime <= elapsed <= runtime + 3e9, (test["kind"], elapsed)
    rec = measured_exactly(load)
    assert rec["ramp_transfers"] > 0 and rec["start"] - rec["phase"]["released"] >= 0.3e9
    assert "run time = 1 s (-t, measured after the ramp: 0.7 s)" in r.stdout
    rec = measured_exactly(bzero)                  # a count with a ramp: exactly n x i measured
    assert rec["transfers"] == 20 and rec["ramp_transfers"] > 0
    rec = measured_exactly(cyclic)                 # one wake-up per interval at most
    assert rec["transfers"] <= (rec["finish"] - rec["start"]) // 1_000_000 + 1


def test_t_with_threads_lanes_counts_exactly_and_the_data_check_passes(tmp_path):
    r = run_cli("-smkey", "0x7D62", "-json", "t.json", "-engine", "threads",
                "-t", "0.6", "-ramp", "0.1", "-KB", "4", "-mfileMB", "8", "-percR", "50",
                "-aio", "4", "-t", "0.4", "-KB", "4", "-mfileMB", "4", "-rmw")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    for test, runtime in zip(doc["tests"], (0.5e9, 0.4e9)):
        rec = measured_exactly(test)
        assert 0.95 * runtime <= rec["finish"] - rec["start"] <= runtime + 3e9


def lat_record(row, us_value, **kw):
    """A record whose every latency is us_value (so p50 = p99 = max = us_value)."""
    ns = int(us_value * 1000)
    return record(row, 0, 1000 * MS, 10, 0, lat_min=ns, lat_max=ns, lat_sum=10 * ns,
                  lat_count=10, hist=((bucket(ns), 10),), **kw)


def test_the_baseline_block_puts_the_largest_slowdown_first():
    plan = cmdline.parse("-n 8 -load -cyclic 1000 -spinWait -seed 1".split())
    procs = plan.procs()
    alone = (record(0, 0, 1000 * MS, 1000, MB), lat_record(1, 10), record(2, 0, 1000 * MS, 10, 0,
                                                                          ops=200))
    together = (record(0, 0, 1000 * MS, 900, MB), lat_record(1, 50), record(2, 0, 1000 * MS, 10,
                                                                             0, ops=100))
    found, ranks = figures.changes([figures.main_figures(r, p) for r, p in zip(alone, procs)],
                                   [figures.main_figures(r, p) for r, p in zip(together, procs)],
                                   procs)
    assert report.baseline_lines(found)[1:] == [
        report.BASELINE_HEADER,
        "1, Cyclic, p99(us), 10.0, 50.0, +400.0",          # 5 times worse
        "1, Cyclic, max(us), 10.0, 50.0, +400.0",
        "2, SpinWait, loops/s, 200.0, 100.0, -50.0",       # 2 times
        "0, Load, BW(MB/s), 1000.0, 900.0, -10.0",         # 1.11 times
        "0, Load, IO/s, 1000.0, 900.0, -10.0"]
    assert [c.slowdown for c in found[::2]] == [5.0, 2.0, pytest.approx(1000 / 900)]


def test_a_stream_ranks_by_its_bandwidth_not_by_late_frames_from_none():
    """A stream with 3 late frames together, none alone, outranked a test that lost 37% of its
    bandwidth (a count from 0 read as an infinite slowdown)."""
    plan = cmdline.parse("-n 8 -load -streams r 2 64 10 0 1 16".split())
    procs = plan.procs()
    none = dict.fromkeys(figures.FIGURES)
    a = [{**none, "bw": 100.0}, {**none, "late": 0.0, "bw": 64.0}]
    t = [{**none, "bw": 63.0}, {**none, "late": 3.0, "bw": 64.0}]
    found, ranks = figures.changes(a, t, procs)
    assert [(c.proc, c.figure.name) for c in found] == [(0, "bw"), (1, "bw"), (1, "late")]
    assert [(r.proc, r.figure.name, r.noise) for r in ranks] == [(0, "bw", figures.ONE_RUN),
                                                                 (1, "bw", figures.ONE_RUN)]
    lines = report.baseline_lines(found, ranks=ranks)
    assert "1, Streams, late frames, 0.0, 3.0, new" in lines
    assert lines[-2:] == ["one run (no spread measured: -repeat N gives each an interval): proc 0 "
                          "(Load) BW(MB/s): -37.0%",
                          "one run (no spread measured: -repeat N gives each an interval): proc 1 "
                          "(Streams) BW(MB/s): +0.0%"]


def test_baseline_ranks_by_a_change_with_its_interval_and_noise_is_not_ranked():
    """Three runs of one -baseline plan swapped the middle of the ranking: changes inside the
    alone runs' own spread were ranked as findings."""
    plan = cmdline.parse("-n 8 -load -n 8 -bzero -spinWait".split())
    procs = plan.procs()
    none = dict.fromkeys(figures.FIGURES)
    runs_of = lambda key, *vs: [{**none, key: v} for v in vs]          # noqa: E731
    alone = [runs_of("bw", 1000, 990, 1010, 1005, 995), runs_of("bw", 500, 520, 480, 510, 490),
             runs_of("loops_per_s", 100, 101, 99, 100, 100)]
    together = [runs_of("bw", 800, 790, 805, 810, 795), runs_of("bw", 505, 515, 470, 495, 500),
                runs_of("loops_per_s", 70, 72, 69, 71, 70)]
    found, ranks = figures.changes([figures.medians(r) for r in alone],
                                   [figures.medians(r) for r in together], procs, alone, together)
    assert [(r.proc, r.noise) for r in ranks] == [(2, ""), (0, ""), (1, figures.WITHIN_NOISE)]
    assert [c.proc for c in found] == [2, 0, 1]
    assert ranks[0].loss_pct == pytest.approx(29.6) and ranks[1].loss_pct == pytest.approx(20.0)
    lines = report.rank_lines(ranks)
    assert lines[1].startswith("1. proc 2 (SpinWait) loops/s: -29.6% (95% CI -")
    assert lines[2].startswith("2. proc 0 (Load) BW(MB/s): -20.0% (95% CI -")
    assert lines[3].startswith("within noise (together inside the alone runs' own min-max, or "
                               "the interval holds 0), not ranked: proc 1 (Bzero) BW(MB/s): ")


def test_baseline_s_alone_figures_match_a_run_alone_and_reach_json_and_csv(tmp_path):
    bzero = ["-t", "0.4", "-n", "64", "-KB", "256", "-bzero"]     # long enough to be steady
    r = run_cli("-smkey", "0x7D63", "-baseline", "-json", "b.json", "-csv", "b.csv", *bzero,
                "-n", "200", "-KB", "256", "-spinWait")
    assert r.returncode == 0, r.stderr
    solo = run_cli("-smkey", "0x7D64", "-json", "a.json", *bzero)
    assert solo.returncode == 0, solo.stderr
    doc = json.loads((tmp_path / "b.json").read_text())
    VALIDATOR.validate(doc)
    alone_bw = doc["tests"][0]["alone"]["bw"]
    solo_bw = json.loads((tmp_path / "a.json").read_text())["tests"][0]["figures"]["bw"]
    assert solo_bw / 3 < alone_bw < solo_bw * 3
    assert [len(t["alone_info"]) for t in doc["tests"]] == [1, 1]      # one run alone each
    spin = doc["tests"][1]
    assert spin["spin"]["alone_per_s"] == spin["alone"]["loops_per_s"] > 0   # one mechanism
    changes = doc["baseline"]["changes"]
    assert {(c["proc"], c["figure"]) for c in changes} == {
        (0, "bw"), (0, "iops"), (0, "p50_us"), (0, "p99_us"), (0, "cpu_pct"), (0, "wait_pct"),
        (1, "loops_per_s"), (1, "cpu_pct"), (1, "wait_pct")}
    assert all(0 < c["alone"] < 110 for c in changes if c["figure"] == "cpu_pct")   # one CPU
    ranking = doc["baseline"]["ranking"]          # one run each: no interval, said so
    assert [(r["proc"], r["figure"], r["noise"], r["p"]) for r in ranking] == \
        [(r["proc"], r["figure"], "one run", None) for r in ranking]
    assert {r["figure"] for r in ranking} == {"bw", "loops_per_s"}
    losses = [-r["change_pct"] if r["figure"] != "p99_us" else r["change_pct"] for r in ranking]
    assert losses == sorted(losses, reverse=True)
    lines = r.stdout.splitlines()
    block = lines[lines.index(report.BASELINE_HEADER) + 1:][:len(changes)]
    unresolved = {int(ln.split(", ")[0]) for ln in block if "(not resolved " in ln}
    in_text = sorted(changes, key=lambda c: c["proc"] in unresolved)   # those last, as said
    assert [ln.split(", ")[:3] for ln in block] == \
        [[str(c["proc"]), c["test"], figures.FIGURES[c["figure"]].label] for c in in_text]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "b.csv").read_text())))
    assert float(rows[0]["alone.bw (MB/s)"]) == alone_bw
    assert float(rows[0]["together.bw (MB/s)"]) == doc["tests"][0]["figures"]["bw"]


def test_repeat_keeps_every_repetition_and_prints_medians(tmp_path):
    r = run_cli("-smkey", "0x7D65", "-repeat", "3", "-json", "r.json",
                "-n", "32", "-KB", "256", "-bzero", "-n", "8", "-KB", "64", "-spinWait")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    VALIDATOR.validate(doc)
    reps = doc["repeats"]
    assert reps["count"] == len(reps["runs"]) == 3
    first = [{k: v for k, v in t.items() if k != "alone"} for t in doc["tests"]]
    assert reps["runs"][0]["tests"] == first                 # the top level is repetition 1
    for entry in reps["summary"]:
        values = [run["tests"][entry["proc"]]["figures"][entry["figure"]] for run in reps["runs"]]
        assert entry["median"] == statistics.median(values)
        assert (entry["min"], entry["max"]) == (min(values), max(values))
        label = figures.FIGURES[entry["figure"]].label
        printed = f", {label}, {entry['median']:.1f}, {entry['min']:.1f}, {entry['max']:.1f}, "
        assert any(ln.startswith(f"{entry['proc']}, ") and printed in ln
                   for ln in r.stdout.splitlines())
    assert {e["figure"] for e in reps["summary"]} == {"bw", "iops", "p50_us", "p99_us",
                                                      "loops_per_s", "cpu_pct", "wait_pct"}
    assert "Repeated 3 times" in r.stdout
    once = run_cli("-smkey", "0x7D66", "-json", "-", "-n", "4", "-KB", "64", "-bzero")
    assert json.loads(once.stdout)["repeats"] is None and "Repeated" not in once.stderr


def test_repeat_says_which_medians_come_from_figures_not_resolved():
    """A test measured for 10 ms in every repetition: its medians read as resolved figures
    (only the first repetition's table was flagged)."""
    from torque_async import cli
    plan = cmdline.parse("-repeat 3 -n 8 -load -n 8 -bzero".split())
    outcomes = tuple(orchestrator.Outcome((record(0, 0, 900 * MS, 80, MB),
                                           record(1, 0, ms * MS, 80, MB)), ())
                     for ms in (10, 200, 20))
    _, _, blocks = cli.repeated(plan, runs.Runs(plan, outcomes), plan.procs())
    assert [ln for ln in blocks if ln.startswith("proc ")] == \
        ["proc 1: not resolved in 2 of 3 repetitions: its medians are not resolved"]


def test_baseline_interleaves_alone_and_together_and_a_failure_ends_the_series(monkeypatch):
    """-repeat with -baseline ran every run alone first, then every run together: a drift of
    the machine fell on one side. Each repetition now runs each group alone, then the plan
    (ABAB...)."""
    plan = cmdline.parse("-repeat 3 -baseline -n 8 -load -p 2 -n 4 -bzero".split())
    ran, fail_at = [], [0]

    def fake_run(p, linesize, meet=None):
        ran.append(tuple(g.action for g in p.groups))
        recs = tuple(record(i, 0, 1000 * MS, 100 * len(ran), MB) for i in range(len(p.procs())))
        failing = len(ran) == fail_at[0]
        return orchestrator.Outcome(recs, ("test 0 failed: planted",) if failing else (),
                                    unfinished=("test 1 stopped while running",) if failing
                                    else ())
    monkeypatch.setattr(runs.orchestrator, "run", fake_run)
    done = runs.run(plan, 64)
    both = ("load", "bzero")
    assert ran == [("load",), ("bzero",), both] * 3
    assert [len(a) for a in done.alone] == [3, 3] and len(done.together) == 3
    procs = plan.procs()
    assert [a["iops"] for a in done.alone_figures(procs)] == [400.0, 500.0, 500.0]  # 1 4 7; 2 5 8
    assert [[t["iops"] for t in test] for test in done.per_test(procs)] == [[300.0, 600.0,
                                                                            900.0]] * 3
    ran.clear()
    fail_at[0] = 2                                    # group 1 alone, in repetition 1
    done = runs.run(plan, 64)
    assert ran == [("load",), ("bzero",)] and len(done.alone) == 2 and done.first is None
    assert done.failures == ("group 1 alone (-baseline), repetition 1 of 3: test 0 failed: "
                             "planted",)
    assert done.unfinished == ("group 1 alone (-baseline), repetition 1 of 3: test 1 stopped "
                               "while running",)     # the failing run's
    ran.clear()
    fail_at[0] = 5                                    # group 1 alone, in repetition 2
    done = runs.run(plan, 64)
    assert ran == [("load",), ("bzero",), both, ("load",), ("bzero",)]
    assert len(done.together) == 1 and [len(a) for a in done.alone] == [1, 1]   # whole pairs
    assert done.failures == ("group 1 alone (-baseline), repetition 2 of 3: test 0 failed: "
                             "planted",) and done.first is done.together[0]
    ran.clear()
    fail_at[0] = 6                                    # the second repetition together fails
    done = runs.run(plan, 64)
    assert len(ran) == 6 and len(done.together) == 2 and done.complete == done.together[:1]
    assert done.failures == ("repetition 2 of 3: test 0 failed: planted",)
    assert done.unfinished == ("repetition 2 of 3: test 1 stopped while running",)


def test_a_baseline_stopped_in_a_run_alone_reports_and_exports_that_run(monkeypatch, capsys,
                                                                          tmp_path):
    """Nothing ran together: it said one line and wrote no -json, losing what the run alone had
    measured and what cut it short."""
    def fake_run(p, linesize, meet=None):
        recs = tuple(record(i, 0, 1000 * MS, 100, MB) for i in range(len(p.procs())))
        failing = p.groups[0].action == "bzero"
        return orchestrator.Outcome(recs, ("test 0 failed: planted",) if failing else (),
                                    unfinished=("test 1 stopped while running",) if failing
                                    else ())
    monkeypatch.setattr(runs.orchestrator, "run", fake_run)
    monkeypatch.chdir(tmp_path)
    code, out, err = execute(capsys, "-baseline", "-json", "b.json", "-n", "8", "-load", "-p",
                             "2", "-n", "4", "-bzero")
    assert code == 1
    assert out.rstrip().endswith("INCOMPLETE: some tests failed in group 1 alone (-baseline), "
                                 "before any run together\n"
                                 "group 1 alone (-baseline): test 0 failed: planted\n"
                                 "group 1 alone (-baseline): test 1 stopped while running")
    doc = json.loads((tmp_path / "b.json").read_text())
    VALIDATOR.validate(doc)
    assert [t["kind"] for t in doc["tests"]] == ["Bzero", "Bzero"]
    assert doc["failures"] == ["group 1 alone (-baseline): test 0 failed: planted"]
    assert doc["plan"]["settings"]["baseline"] and doc["baseline"] is None   # (as asked; said
    assert doc["plan"]["groups"][0]["text"] == "-p 2 -n 4 -bzero"           # false)
    assert doc["stopped_alone"] == 1          # the plan's group 1 (its entry ran as index 0)


def test_repeat_gives_a_share_s_spread_in_points():
    """CPU wait 0.0, 0.0 and 1.7 read as a spread of 9206.3%."""
    procs = cmdline.parse("-n 8 -load".split()).procs()
    none = dict.fromkeys(figures.FIGURES)
    spreads = figures.spreads([{**none, "bw": bw, "wait_pct": w}
                               for bw, w in ((100.0, 0.0), (110.0, 0.02), (90.0, 1.7))])
    lines = report.repeat_lines([spreads], procs, 3)
    assert lines[2:] == ["0, Load, BW(MB/s), 100.0, 90.0, 110.0, 20.0, 10.0, 10.0",
                         "0, Load, CPU wait(%), 0.0, 0.0, 1.7, 1.7 points, 1.0, NA"]


def test_repeat_stopped_in_its_first_repetition_exports_no_repeats(monkeypatch, capsys,
                                                                     tmp_path):
    """It wrote repeats.count 1, the cut-short run as if complete: a stop in repetition 2
    wrote count 1 too, for the one that was."""
    def fake_run(p, linesize, meet=None):
        return orchestrator.Outcome((record(0, 0, 900 * MS, 80, MB),), (), interrupted=15,
                                    unfinished=("test 0 stopped while running",))
    monkeypatch.setattr(runs.orchestrator, "run", fake_run)
    monkeypatch.chdir(tmp_path)
    code, _, _ = execute(capsys, "-repeat", "3", "-json", "r.json", "-n", "8", "-load")
    doc = json.loads((tmp_path / "r.json").read_text())
    VALIDATOR.validate(doc)
    assert code == 143 and doc["repeats"] is None and doc["interrupted"] == "SIGTERM"


def test_a_baseline_stopped_in_a_later_repetition_alone_says_nothing_ran_together():
    """-baseline -repeat 2 stopped in group 1's second run alone said 'after 1 complete
    repetition: the figures are theirs', as if the plan had run together once."""
    lines = report.closing_lines((), 15, ("group 1 alone (-baseline), repetition 2 of 2: test 0 "
                                          "stopped while running",), 1, "group 1 alone (-baseline)")
    assert lines[0] == ("INTERRUPTED by SIGTERM after 1 complete repetition in group 1 alone "
                        "(-baseline), before any run together: the figures are theirs")
    assert report.closing_lines((), 15, (), 0, "group 0 alone (-baseline)")[0] == (
        "INTERRUPTED by SIGTERM in group 0 alone (-baseline), before any run together: the "
        "figures cover the transfers measured before it")


@pytest.mark.parametrize("mode", ["-fast", "-slow"])
def test_under_t_a_test_finishes_at_its_time_and_slow_keeps_it_running_unmeasured(tmp_path,
                                                                                  mode):
    r = run_cli("-smkey", "0x7D67" if mode == "-fast" else "0x7D68", mode, "-json", "t.json",
                "-t", "0.3", "-KB", "64", "-load", "-t", "0.9", "-KB", "64", "-bzero")
    assert r.returncode == 0, r.stderr
    short, long = (measured_exactly(t) for t in json.loads((tmp_path / "t.json").read_text())
                   ["tests"])
    assert 0.3e9 <= short["finish"] - short["start"] < long["finish"] - long["start"]
    assert long["finish"] - long["start"] >= 0.9e9
    assert (short["extra_transfers"] > 0) == (mode == "-slow") and long["extra_transfers"] == 0


def test_a_test_that_waited_for_a_cpu_together_is_said_to():
    """Two memory kernels and a file test on 2 CPUs: Bcopy's -66% read as the memory's, while
    it waited for a CPU 60% of its time together. A lower CPU share alone is no such wait: a
    disk test whose reads took longer together (on a CPU 28% of its time, 49% alone) read as
    one that waited for a CPU."""
    cpu, wait = figures.FIGURES["cpu_pct"], figures.FIGURES["wait_pct"]
    lines = report.baseline_lines([figures.Change(0, "Bcopy", cpu, 99.0, 37.0),
                                   figures.Change(0, "Bcopy", wait, 1.0, 60.0),
                                   figures.Change(1, "Random", cpu, 49.0, 28.0),
                                   figures.Change(1, "Random", wait, 0.5, 2.0)])
    assert lines[-1] == ("proc 0 (Bcopy): waited for a CPU (runnable, not running) 60% of its "
                         "time together, 1% alone: more runnable threads than CPUs, of these "
                         "tests or other programs, so its slowdown is not all its memory's or "
                         "disk's")
    assert "0, Bcopy, CPU wait(%), 1.0, 60.0, +59.0 points" in lines and len(lines) == 7  # (a
    assert "0, Bcopy, CPU(%), 99.0, 37.0, -62.0 points" in lines    # share's change: +5900.0%)


def test_a_run_says_which_tests_waited_for_a_cpu_without_baseline():
    """Six busy tests on 2 CPUs waited 48-69% of their time, unflagged without -baseline: their
    figures read as the memory's."""
    rows = (record(0, 0, 1000 * MS, 10, MB, cpu_wait=480 * MS),
            record(1, 0, 1000 * MS, 10, MB, cpu_wait=90 * MS),
            record(2, 0, 1000 * MS, 10, MB, cpu_wait=690 * MS),
            record(3, 0, 1000 * MS, 10, MB, cpu_wait=-1))          # (not known)
    assert report.waited_lines(rows) == [
        "procs 0, 2: waited for a CPU 48-69% of the measured time (more runnable threads than "
        "CPUs, of these tests or other programs): the figures are partly time-slicing's; "
        "-baseline shows how much"]
    assert report.waited_lines(rows[1:2]) == [] and report.waited_lines(rows, True)[0].endswith(
        "partly time-slicing's")
    alike = (rows[0], record(1, 0, 1000 * MS, 10, MB, cpu_wait=481 * MS))
    assert report.waited_lines(alike)[0].startswith("procs 0-1: waited for a CPU 48% of")  # 48-48


def test_a_baseline_says_which_changes_were_not_resolved_and_ranks_them_last():
    """A test measured for under 100 ms (alone or in a repetition together) headed the block
    at -67.6 with no mark, where compare says `not resolved (short)` of the same figure; its
    waited-for-a-CPU conclusion (215%) was drawn from it too."""
    bw, wait = figures.FIGURES["bw"], figures.FIGURES["wait_pct"]
    found = [figures.Change(0, "Bcopy", bw, 1000.0, 324.0), figures.Change(0, "Bcopy", wait,
                                                                          0.0, 215.0),
             figures.Change(1, "Load", bw, 900.0, 800.0)]
    lines = report.baseline_lines(found, unresolved={0: "alone and together"})
    assert lines[0].endswith("in the order of the ranking below, the tests not resolved last")
    assert not report.baseline_lines(found[2:])[0].endswith("last")
    assert lines[2:] == ["1, Load, BW(MB/s), 900.0, 800.0, -11.1",
                         "0, Bcopy, BW(MB/s), 1000.0, 324.0, -67.6 (not resolved alone and "
                         "together)",
                         "0, Bcopy, CPU wait(%), 0.0, 215.0, +215.0 points (not resolved alone "
                         "and together)"]
    plan = cmdline.parse(["-n", "8", "-MB", "4", "-bcopy", "-n", "8", "-MB", "4", "-load"])
    procs = plan.procs()
    a0, s0 = record(0, 0, 500 * MS, 8, 0), record(0, 0, 5 * MS, 8, 0)
    b1, s1 = record(1, 0, 500 * MS, 8, 0), record(1, 0, 5 * MS, 8, 0)
    assert report.unresolved_sides(procs, [[a0], [s1]], [[a0, b1], [s0, b1]]) == \
        {0: "together", 1: "alone"}


def test_a_baseline_whose_run_together_was_cut_short_marks_those_changes():
    """Stopped in its run together, the block ranked a cut-short test's change (13 transfers,
    -29.6%) as if it were measured whole."""
    bw = figures.FIGURES["bw"]
    lines = report.baseline_lines([figures.Change(0, "Load", bw, 1000.0, 704.0),
                                   figures.Change(1, "Bzero", bw, 900.0, 890.0)], cut={0})
    assert lines[2:4] == ["0, Load, BW(MB/s), 1000.0, 704.0, -29.6 (cut short together)",
                          "1, Bzero, BW(MB/s), 900.0, 890.0, -1.1"]


def test_the_harness_cost_is_the_median_of_its_readings_not_one():
    """One reading of 12.3 us (a preemption) where the cost is 0.2 us disqualified a 4 s test
    of 35,000 transfers as 'not resolved (harness)'."""
    from torque_async.meter import harness_cost
    from torque_async.stats import BATCH
    per = [200, 210, 12_300, 190, 205]                  # ns per round, one reading preempted
    ticks = iter([t for ns in per for t in (0, ns * BATCH)])
    assert harness_cost(len(per), clock=lambda: next(ticks)) == 205
    assert 0 < harness_cost() < 100_000                 # a real one: some ns, not nothing


def test_set_up_that_differs_only_in_a_scratch_directory_s_name_is_no_choice():
    """Every file stream under -repeat said 'set-up chose differently in each repetition': only
    the random scratch directory's name differed."""
    procs = cmdline.parse("-n 8 -load".split()).procs()
    where = "2 frames per track in scratch /w/torque-async-scratch.{}/stream0.dat"
    reps = [(record(0, 0, MS, 8, MB, info=where.format(name)),)
            for name in ("4121.k2j_x9", "4188.ab8q0e", "4201.vm.r0.zz01q")]
    assert report.choice_lines(reps, None, procs) == []
    other = [(record(0, 0, MS, 8, MB, info="4 frames per track in memory"),)]
    assert report.choice_lines(reps[:1] + other, None, procs)[0].startswith(
        "proc 0: set-up chose differently in each repetition: 1: 2 frames per track in scratch "
        "/w/torque-async-scratch.*/stream0.dat | 2: 4 frames")
