"""capacity: the search (a fake runner with a known step), its table and JSON, the plan's
edits, the criteria on results documents, bad input, and small real searches."""
from __future__ import annotations

import json
import math
import os
import signal

import pytest

from conftest import run_cli, start
from torque_async import capacity, cmdline, criteria, orchestrator, plot, varied
from torque_async.capacity import Round, Setup
from torque_async.criteria import Criterion
from torque_async.search import Rule, Search

HELD = Criterion("held", "held")


def fake_round(value: int, passed: bool, figure: float = 0.0) -> Round:
    doc = {"tests": [{"proc": k} for k in range(value)]}      # the run's document, told apart
    return Round(value, passed, (figure,), "" if passed else f"stream proc 0 MISSED at {value}",
                 (), (100.0 * value,), 0.5, 0, doc)


def stepper(step: int, noise: set[tuple[int, int]] = frozenset()):
    """A runner that passes values up to `step`; (value, round) in noise fails anyway."""
    calls: list[int] = []

    def attempt(value: int) -> Round:
        calls.append(value)
        k = calls.count(value)
        return fake_round(value, value <= step and (value, k) not in noise, float(value > step))
    return attempt, calls


def searched(step, rule=Rule(3, 3), start=1, floor=1, ceiling=1024, noise=frozenset()):
    s = Search(start, floor, ceiling, rule)
    attempt, calls = stepper(step, noise)
    assert capacity.explore(s, attempt, "-p", lambda line: None) == 0
    return s, calls


@pytest.mark.parametrize("step", [1, 2, 5, 37, 100, 513, 1023])
def test_the_search_finds_the_step_in_logarithmic_runs(step):
    s, calls = searched(step)
    lo, hi = s.answer()
    assert (lo.value, hi.value) == (step, step + 1)
    assert Rule(3, 3).verdict(lo.passes) is True and Rule(3, 3).verdict(hi.passes) is False
    assert len(lo.rounds) == 3 and len(hi.rounds) == 1     # a failed round decides 3/3
    # doubling to 1024 and bisecting a span of at most 512: 2 log2(1024) + the 2 rounds left
    assert len(calls) <= 2 * math.log2(1024) + 2
    assert len(calls) < step + 1 or step <= 5                # fewer than a sweep of every N


def test_from_a_start_that_fails_it_halves_down():
    s, calls = searched(5, start=64)
    assert calls[:5] == [64, 32, 16, 8, 4]
    assert (s.answer()[0].value, s.answer()[1].value) == (5, 6)


def test_the_max_reached_and_the_min_failed():
    s, _ = searched(2000, ceiling=48)
    assert s.answer()[0].value == 48 and s.answer()[1] is None
    s, calls = searched(3, start=8, floor=8)
    assert s.answer() == (None, s.points[8]) and calls == [8]


def test_one_failing_round_fails_a_point_unless_pass_allows_it():
    noise = {(37, 2)}                                    # 37's second round fails
    s, _ = searched(37, Rule(3, 3), noise=noise)
    lo, hi = s.answer()
    assert (lo.value, hi.value) == (36, 37) and hi.passes == [True, False]
    s, _ = searched(37, Rule(3, 2), noise=noise)
    lo, hi = s.answer()
    assert (lo.value, hi.value) == (37, 38) and lo.passes == [True, False, True]


def test_a_noisy_first_round_is_settled_before_the_search_goes_below_it():
    # 36 fails its first round: under 2/3 it is revisited at once, passes 2 of 3, and the
    # search goes on above it (no bisection below 36)
    s, calls = searched(37, Rule(3, 2), noise={(36, 1)})
    lo, hi = s.answer()
    assert (lo.value, hi.value) == (37, 38)
    assert s.points[36].passes == [False, True, True]
    assert calls[calls.index(36):calls.index(36) + 3] == [36, 36, 36]
    assert not {33, 34, 35} & set(calls)


def test_the_two_bounds_rounds_interleave():
    # under 2/3, 36 (one pass) and 37 (one fail) are one apart and both undecided
    s, calls = searched(36, Rule(3, 2))
    assert [v for v in calls if v in (36, 37)] == [36, 37, 36, 37]
    assert (s.answer()[0].value, s.answer()[1].value) == (36, 37)


@pytest.mark.parametrize("step", [9, 37, 300])
def test_noisy_rounds_under_pass_2_of_3_keep_the_step_and_the_runs_logarithmic(step):
    # a failing first round at points the search crosses: the doubling's last pass, the
    # bisection's midpoint below the step, the step itself
    below = 1 << (step.bit_length() - 1)
    noise = {(below, 1), ((below + 2 * below) // 2, 1), (step, 1)}
    s, calls = searched(step, Rule(3, 2), noise=noise)
    lo, hi = s.answer()
    assert (lo.value, hi.value) == (step, step + 1)
    assert len(calls) <= 2 * math.log2(1024) + 3 * 3       # + the noisy points' revisits


def setup_for(*crit: Criterion, rule=Rule(3, 3)) -> Setup:
    knob = varied.Knob("procs", 0, "p", 1, 1024, "-p")
    return Setup(knob, crit or (HELD,), rule, ((1, "Striad"),), {}, {})


def test_the_table_and_the_json_hold_every_run():
    s, calls = searched(5)
    setup = setup_for()
    rows = capacity.table(setup, s)
    assert rows[0] == "-p,passed,held: streams not held,Striad BW(MB/s),verdict"
    assert [r.split(", ")[0] for r in rows[1:]] == [str(v) for v in sorted(set(calls))]
    row5 = next(r for r in rows if r.startswith("5, "))
    assert row5 == "5, 3/3, 0 [0-0], 500.0 [500.0-500.0], pass"
    assert rows[-1].startswith("8, 0/1, 1, 800.0, fail")
    doc = json.loads(json.dumps(capacity.document(setup, s, 0, ["-w"], "capacity -- -w", 1.0)))
    assert doc["schema"] == capacity.SCHEMA and (doc["capacity"], doc["failed"]) == (5, 6)
    assert sum(len(p["rounds"]) for p in doc["points"]) == len(calls)
    assert all(len(r["run"]["tests"]) == p["value"] for p in doc["points"] for r in p["rounds"])
    said = capacity.summary(setup, s, 0)
    assert said[0].startswith("capacity: 5 (passed 3/3); 6 failed (passed 0/1); -p of group 0")
    assert said[1] == "6 failed: round 1: stream proc 0 MISSED at 6"


def test_a_figure_not_resolved_is_named_with_its_point():
    from dataclasses import replace
    s = Search(1, 1, 4, Rule(1, 1))
    for v, flag in ((2, "p99 from 80 transfers"), (1, "p99 from 40 transfers"),
                    (2, "p99 from 80 transfers")):
        s.add(v, replace(fake_round(v, True), flags=(flag,)))
    said = capacity.summary(setup_for(rule=Rule(1, 1)), s, 0)
    assert [ln for ln in said if ln.startswith("not resolved")] == [
        "not resolved: -p 1: p99 from 40 transfers", "not resolved: -p 2: p99 from 80 transfers"]
    one = Search(1, 1, 1, Rule(1, 1))
    one.add(1, fake_round(1, True))
    assert capacity.summary(setup_for(rule=Rule(1, 1)), one, 0)[0] == (
        "capacity: at least 1 (passed 1/1): the --max reached; -p of group 0, a point passes 1 "
        "of 1 round; 1 run")


def test_a_stop_as_a_run_begins_ends_that_run_at_once(tmp_path):
    """A signal after the search's last look and before the run's own handlers (the moment
    the progress line reaches the user) ends the run at once: the run is not made whole and
    counted, with the stop seen only before the next."""
    kept = {sig: signal.getsignal(sig) for sig in orchestrator.STOP_SIGNALS}
    went_on = []

    def execute(argv):                     # a run that the signal reaches as it begins
        os.kill(os.getpid(), signal.SIGTERM)
        went_on.append(argv)               # (a whole run, from here)
        return 0
    try:
        capacity.STOPS.clear()
        capacity.catch_stops()
        code, doc, _, _ = capacity.quiet_run(execute, str(tmp_path), ["-w"], "run1.json")
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
    assert code == 128 + signal.SIGTERM and doc is None and went_on == []
    assert os.listdir(tmp_path) == []


def test_a_stop_ends_the_search_and_keeps_the_points_so_far():
    attempt, calls = stepper(37)

    def stopped(value: int) -> Round:
        if len(calls) == 4:
            raise orchestrator.Interrupted(signal.SIGINT)
        return attempt(value)
    s = Search(1, 1, 1024, Rule(3, 3))
    assert capacity.explore(s, stopped, "-p", lambda line: None) == signal.SIGINT
    assert sorted(s.points) == [1, 2, 4, 8]
    said = capacity.summary(setup_for(), s, signal.SIGINT)
    assert said[0].startswith("capacity: interrupted by SIGINT after 4 runs: so far 8 passed")


def test_progress_names_the_point_the_round_and_the_time_left():
    lines = []
    ticks = iter(range(0, 1000, 10))
    s = Search(1, 1, 16, Rule(2, 2))
    capacity.explore(s, stepper(3)[0], "-p", lines.append, clock=lambda: next(ticks))
    assert lines[0] == "capacity: -p 1 (point 1), round 1 of 2; run 1, 10 s so far"
    assert lines[1].startswith("capacity: -p 2 (point 2), round 1 of 2; run 2, 20 s so far; "
                               "about ")
    assert "estimated from the 1 so far" in lines[1]
    assert any("-p 3 (point 4), round 2 of 2" in line for line in lines)


def plan_of(line: str):
    return cmdline.parse(line.split())


def test_the_plan_s_tokens_carry_the_varied_value():
    line = "-smkey 0x4040 -dir d -cfiles -files 10 -fps 60 -streams w 2 0 0 0 1 8 -p 3 -aio 4"
    plan, lay = plan_of(line), varied.layout(line.split())
    at = lambda vary, group, value, made=False: " ".join(varied.tokens_at(  # noqa
        lay, varied.knob(plan, group, vary), value, made))
    assert at("procs", 1, 6) == line.replace("-streams", "-p 6 -streams")
    assert at("procs", 0, 2, True) == line.replace("-cfiles ", "").replace("-files", "-p 2 -files")
    assert at("qd", 2, 16) == line.replace("-aio 4", "-aio 16")
    assert at("rate", 1, 120) == line.replace("-streams", "-fps 120 -streams")
    assert varied.alone(lay, 2) == "-smkey 0x4040 -p 3 -aio 4".split()
    assert varied.knob(plan, 2, "qd").start == 4 and varied.knob(plan, 2, "procs").start == 3
    paced = "-T 1000 -n 8 -KB 4 -w"
    k = varied.knob(plan_of(paced), 0, "rate")
    assert k.start == 1000 and varied.tokens_at(varied.layout(paced.split()), k, 250, False) \
        == "-T 1000 -n 8 -KB 4 -T 4000 -w".split()


def test_criteria_read_a_results_document():
    sub = {"sub": "0 write t0", "frames": 60, "late": 3, "dropped": 1, "lateness_max": 2500,
           "verdict": "MISSED"}
    held = {"verdict": "HELD", "sub0": {**sub, "late": 0, "dropped": 0, "verdict": "HELD"}}
    record = {"lat_count": 1000, "lat_min": 1000, "lat_max": 9000, "lat_sum": 0,
              "hist": [[1000, 1000, 500], [9000, 9000, 500]]}
    doc = {"failures": [], "tests": [
        {"proc": 0, "group": 0, "streams": held, "table": {"bw": 100.0}, "record": record},
        {"proc": 1, "group": 0, "streams": {"verdict": "MISSED", "sub0": sub},
         "table": {"bw": 100.0}, "record": record},
        {"proc": 2, "group": 1, "streams": None, "table": {"bw": 750.0}, "record": record}]}
    j = criteria.judge(HELD, doc, 0, {})
    assert (j.value, j.passed) == (1, False)
    assert j.why.startswith("stream proc 1 (group 0) MISSED (0 write t0: 3 lost, 1 dropped")
    late = criteria.judge(Criterion("late<0.05", "late", 0.05), doc, 0, {})
    assert late.value == pytest.approx(4 / 120) and late.passed
    keep = criteria.judge(Criterion("Striad bw>0.8", "keep", 0.8, 1), doc, 0, {1: 1000.0})
    assert keep.value == pytest.approx(0.75) and not keep.passed and "0.750 of its" in keep.why
    p99 = criteria.judge(Criterion("p99<5us", "p99", 5000), doc, 0, {})
    assert not p99.passed and p99.value > 5 and not p99.flag
    p999 = criteria.judge(Criterion("p999<10us", "p999", 10000), doc, 0, {})
    assert p999.passed and "from 2000 transfers (it needs 1000" not in p999.flag
    failed = criteria.judge(HELD, {**doc, "failures": ["proc 2: disk full"]}, 0, {})
    assert not failed.passed and failed.why == "the run did not finish: proc 2: disk full"


@pytest.mark.parametrize("args, message", [
    (["--"], "no group to vary"),
    (["--until", "p99<1ms", "--", "-smkey", "0x4040", "-spinWait"], "measures no latency"),
    (["--until", "late<0.1", "--", "-n", "4", "-MB", "1", "-Striad"], "has no frames"),
    (["--until", "p50<1ms", "--", "-n", "4", "-MB", "1", "-Striad"], "not a criterion"),
    (["--", "-n", "4", "-MB", "1", "-Striad"], "no criterion"),
    (["--max", "2", "--until", "p99<1s", "--", "-p", "4", "-n", "4", "-MB", "1", "-Striad"],
     "--max 2 is below the start, -p 4"),
    (["--vary", "qd", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     "not an -aio test"),
    (["--group", "3", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     "--group 3: the plan has groups 0..0"),
    (["--keep", "Sadd bw>0.8", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     "no group runs -Sadd"),
    (["--pass", "4/3", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     "--pass 4/3"),
    (["--until", "p99<1s", "--", "-repeat", "3", "-n", "4", "-MB", "1", "-Striad"],
     "-repeat in the plan"),
    (["--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striadd"], "unknown option"),
    (["--until", "p99<0ms", "--", "-n", "4", "-MB", "1", "-Striad"], "no run can meet it"),
    (["--until", "late<0", "--", "-fps", "10", "-frame", "8x8", "-pixfmt", "rgba8",
      "-memStreams", "w", "1", "0", "0", "0", "1", "1"], "no run can meet it"),
    (["--min", "99999999999999999999", "--until", "p99<1s", "--", "-n", "4", "-MB", "1",
      "-Striad"], "--min 99999999999999999999: -p takes at most 1024"),
    (["--max", "2000", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     "--max 2000: -p takes at most 1024"),
    (["--until", "p99<1s", "--max", "1", "--rounds", "1", "--", "-g", "-n", "4", "-MB", "1",
      "-Striad"], "-g in the plan"),
    (["--json", "", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     "--json '': name a file"),
    (["--json", "-", "--until", "p99<1s", "--", "-n", "4", "-MB", "1", "-Striad"],
     "--json -: name a file"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    done = run_cli("capacity", *args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1
    assert message in done.stderr and "Traceback" not in done.stderr


def test_the_json_is_never_written_onto_the_plan_s_input(key, tmp_path):
    """--json is checked as a run's -json is: the -f file the plan reads is refused before any
    point runs, and left as it was."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * 65536)
    done = run_cli("capacity", "--json", str(data), "--until", "p99<1s", "--max", "1",
                   "--rounds", "1", "--", "-smkey", key, "-f", str(data), "-n", "8", "-KB", "4",
                   "-r", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "capacity: --json" in done.stderr and "is the same file as -f" in done.stderr
    assert data.read_bytes() == b"x" * 65536


def test_a_real_search_runs_the_plan_at_each_point(key, tmp_path):
    """A memory-copy stream, one round each, up to -p 4: the wiring, not the machine's
    capacity (late<1.01 holds for any run that moved frames)."""
    out = tmp_path / "cap.json"
    done = run_cli("capacity", "--max", "4", "--rounds", "1", "--until", "late<1.01",
                   "--json", str(out), "--", "-smkey", key, "-frame", "64x64", "-pixfmt",
                   "rgba8", "-fps", "100", "-memStreams", "w", "2", "0", "0", "0", "0.2", "1")
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert [p["value"] for p in doc["points"]] == [1, 2, 4]
    for p in doc["points"]:
        (r,) = p["rounds"]
        assert len(r["run"]["tests"]) == p["value"] and r["run"]["plan"]["groups"][0][
            "processes"] == p["value"]
        assert 0 <= r["figures"][0] < 1.01 and r["passed"]
    assert "capacity: at least 4 (passed 1/1): the --max reached" in done.stdout
    assert done.stderr.count("capacity: -p ") == 3
    drawn = run_cli("plot", str(out))
    assert drawn.returncode == 0 and (tmp_path / "cap.png").stat().st_size > 1000


def test_under_mpiexec_what_no_run_there_runs_is_refused_before_mpi_starts(monkeypatch):
    """(The search under mpiexec: test_capacity_mpi.py.)"""
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    capacity.refuse(plan_of("-n 4 -MB 1 -Striad"))
    with pytest.raises(cmdline.UsageError, match="-sp runs one test in this process: it cannot "
                                                  "run under an MPI launcher"):
        capacity.refuse(plan_of("-sp -n 4 -MB 1 -Striad"))


def test_keep_measures_the_load_alone_once_and_judges_its_share(key, tmp_path):
    out = tmp_path / "cap.json"
    done = run_cli("capacity", "--max", "2", "--rounds", "1", "--until", "late<1.01",
                   "--keep", "Striad bw>0.001", "--json", str(out), "--", "-smkey", key,
                   "-frame", "64x64", "-pixfmt", "rgba8", "-fps", "100", "-memStreams", "w",
                   "2", "0", "0", "0", "0.2", "1", "-n", "4", "-MB", "1", "-Striad")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("capacity: group 1 alone, for --keep Striad bw>0.001") == 1
    assert done.stdout.splitlines()[1] == \
        "-p,passed,late<1.01: late share,Striad bw>0.001: bw kept,Striad BW(MB/s),verdict"
    doc = json.loads(out.read_text())
    alone = doc["alone"]["1"]["bw"]
    assert alone > 0 and [p["value"] for p in doc["points"]] == [1, 2]
    assert doc["alone"]["1"]["run"]["plan"]["groups"][0]["action"] == "Striad"
    assert len(doc["alone"]["1"]["run"]["tests"]) == 1
    for p in doc["points"]:
        (r,) = p["rounds"]
        striad = [t for t in r["run"]["tests"] if t["group"] == 1]
        assert len(striad) == 1                          # -p went to the streams only
        assert r["figures"][1] == pytest.approx(striad[0]["table"]["bw"] / alone)
        assert r["load"] == [pytest.approx(striad[0]["table"]["bw"])]


def test_a_real_search_of_a_stream_rate(key, tmp_path):
    out = tmp_path / "cap.json"
    done = run_cli("capacity", "--vary", "rate", "--max", "100", "--rounds", "1", "--until",
                   "late<1.01", "--json", str(out), "--", "-smkey", key, "-frame", "64x64",
                   "-pixfmt", "rgba8", "-fps", "50", "-memStreams", "w", "2", "0", "0", "0",
                   "0.2", "1")
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert [(p["value"], p["rounds"][0]["run"]["plan"]["groups"][0]["locals"]["fps"])
            for p in doc["points"]] == [(50, "50"), (100, "100")]
    frames = [p["rounds"][0]["run"]["tests"][0]["streams"]["sub0"]["frames"]
              for p in doc["points"]]
    assert frames == [10, 20]                    # 0.2 s at 50 and at 100 frames per second


def test_a_web_tree_is_made_once_and_reused(key, tmp_path):
    out = tmp_path / "cap.json"
    done = run_cli("capacity", "--until", "p99<100s", "--max", "4", "--rounds", "1", "--json",
                   str(out), "--", "-smkey", key, "-dir", str(tmp_path / "site"), "-cfiles",
                   "-webFiles", "20", "-t", "0.2", "-web")
    assert done.returncode == 0, done.stderr
    commands = [p["rounds"][0]["run"]["command"] for p in json.loads(out.read_text())["points"]]
    assert len(commands) == 3 and "-cfiles" in commands[0]
    assert not any("-cfiles" in c for c in commands[1:])
    assert [c.count(f"-p {n} -web") for n, c in zip((1, 2, 4), commands)] == [1, 1, 1]


def test_a_value_the_run_refuses_is_a_failed_point_with_the_run_s_reason(key):
    cpus = len(os.sched_getaffinity(0))            # -affinityNumberDiff 0 pins process k to k
    done = run_cli("capacity", "--until", "p99<100s", "--max", str(2 * cpus), "--rounds", "1",
                   "--", "-smkey", key, "-affinityNumberDiff", "0", "-n", "4", "-MB", "1",
                   "-Striad")
    assert done.returncode == 0, done.stderr
    assert f"capacity: {cpus} (passed 1/1); {cpus + 1} failed (passed 0/1)" in done.stdout
    assert f"\n{cpus + 1} failed: round 1: the run refused the plan at this value: " \
           f"-affinityNumberDiff: CPU {cpus} is not available here" in done.stdout
    assert f"CPU {cpus} is not available here" in done.stderr        # the run's own line too


def test_a_real_search_of_an_aio_queue_depth(key):
    done = run_cli("capacity", "--vary", "qd", "--max", "2", "--rounds", "1", "--until",
                   "p99<100s", "--", "-smkey", key, "-n", "32", "-KB", "4", "-mfileMB", "1",
                   "-fbc", "-aio", "1")
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert rows[1] == "-aio depth,passed,p99<100s: p99(us),verdict"
    assert [r.split(", ")[:2] for r in rows[2:4]] == [["1", "1/1"], ["2", "1/1"]]


def test_a_signal_ends_a_real_search_and_prints_the_points_so_far(key):
    proc = start("capacity", "--max", "64", "--rounds", "1", "--until", "late<1.01", "--",
                 "-smkey", key, "-frame", "64x64", "-pixfmt", "rgba8", "-fps", "100",
                 "-memStreams", "w", "2", "0", "0", "0", "3", "1")
    for line in proc.stderr:                   # the second point is next
        if line.startswith("capacity: -p 2 "):
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "\n1, 1/1, " in out and "\n2, " not in out
    assert "capacity: interrupted by SIGINT after 1 run: so far 1 passed" in out


def test_plot_draws_the_curve(tmp_path):
    s, _ = searched(5)
    doc = json.loads(json.dumps(capacity.document(setup_for(), s, 0, [], "capacity -- x", 1.0)))
    drawn = plot.render(doc, str(tmp_path / "c.png"))
    assert drawn == [("capacity: 5, 6 failed",
                      ["median, not decided", "median, passed", "median, failed",
                       "criterion held"])]


def test_a_curve_of_one_point_has_integer_ticks():
    """A search that failed at -p 1 drew an axis of 0.96 0.98 1.00 1.02 1.04 for -p."""
    from matplotlib.figure import Figure
    s, _ = searched(0, ceiling=1)
    doc = json.loads(json.dumps(capacity.document(setup_for(), s, 0, [], "capacity -- x", 1.0)))
    assert {p["value"] for p in doc["points"]} == {1}
    (ax,) = plot.curve(doc, Figure)[0].axes
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert 1 in ticks and all(t == int(t) for t in ticks), ticks


def test_a_plan_the_run_s_checks_refuse_is_one_line_before_any_point(key):
    done = run_cli("capacity", "--until", "late<0.5", "--", "-smkey", key, "-frame", "64x64",
                   "-memStreams", "w", "2", "0", "0", "0", "0.2", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "torque-async: error: -memStreams w: -frame WxH and -pixfmt go " \
                          "together: give both\n"


def test_a_stop_after_the_last_run_still_ends_with_its_status(tmp_path):
    """A signal noted after the search's last run (as the table prints) ended the command
    with exit 0, the stop lost: the answer is whole and printed, and the exit says the stop."""
    kept = {sig: signal.getsignal(sig) for sig in orchestrator.STOP_SIGNALS}
    out = tmp_path / "cap.json"

    def execute(argv):
        if "-quit" not in argv:
            record = {"lat_count": 1, "lat_min": 1000, "lat_max": 1000, "lat_sum": 1000,
                      "hist": [[1000, 1000, 1]]}
            doc = {"tests": [{"group": 0, "table": {"bw": 1.0}, "record": record}]}
            with open(argv[argv.index("-json") + 1], "w") as f:
                json.dump(doc, f)
            capacity.STOPS.append(signal.SIGINT)    # as if it came once the run had ended
        return 0
    try:
        code = capacity.main(["-n", "4", "-MB", "1", "-Striad"], 0, "procs", ("p99<1s",), (),
                             1, None, 1, None, str(out), "capacity", execute)
    finally:
        capacity.STOPS.clear()                      # (the process's: the next tests' too)
        for sig, handler in kept.items():
            signal.signal(sig, handler)
    assert code == 128 + signal.SIGINT
    doc = json.loads(out.read_text())
    assert (doc["capacity"], doc["interrupted"]) == (1, None)     # the answer is whole
