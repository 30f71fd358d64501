"""torque-async compare on crafted results files: matching like with like, the figures each
family reports, significance over repetitions, totals over matched tests, exit codes."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from torque_async import cmdline, compare, export
from torque_async.results import RUNNING
from torque_async.stats import merge

from conftest import run_cli
from test_report import INFO, MS, hist_of, record

PLAN = "-n 8 -MB 4 -load -KB 64 -bcopy -spinWait"
REORDERED = "-spinWait -KB 64 -bcopy -n 8 -MB 4 -load"      # the same tests, another order


def document(argv: str, mb: dict[str, float], info=INFO, dead: str = "") -> dict:
    """A results document whose tests moved mb[action] MB in one second each (spinWait: that
    many million loops); the test of action `dead` died before it published (its live count
    only)."""
    plan = cmdline.parse(argv.split())
    recs = []
    for row, proc in enumerate(plan.procs()):
        action, amount = proc.group.action, mb[proc.group.action]
        if action == "spinWait":
            recs.append(record(row, 0, 1000 * MS, 10, 0, ops=int(amount * 1e6),
                               ref_rate=2e6 * amount))
        else:
            recs.append(record(row, 0, 1000 * MS, int(amount), 2**20,
                               sys_factor=2 if action == "bcopy" else 1))
        if action == dead:
            recs[-1] = replace(recs[-1], start=0, finish=0, bytes=0, sys_bytes=0, state=RUNNING)
    return export.document(plan, tuple(recs), plan.procs(), info, argv)


def repeated(argv: str, series: list[dict[str, float]]) -> dict:
    """A -repeat document: one repetition per entry of series."""
    docs = [document(argv, mb) for mb in series]
    runs = [{k: d[k] for k in ("time_zero_ns", "tests", "overlap", "event_loop", "bandwidth")}
            for d in docs]
    return {**docs[0], "repeats": {"count": len(docs), "runs": runs, "summary": []}}


def write(doc: dict, path) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def by_figure(found: compare.Comparison) -> dict[tuple[str, str], compare.Change]:
    return {(c.test.split(" [")[0], c.figure): c for c in found.changes}


def test_a_reordered_plan_matches_test_for_test():
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = document(REORDERED, {"load": 900, "bcopy": 500, "spinWait": 100})
    found = by_figure(compare.compare(a, b))
    assert found[("-n 8 -MB 4 -load", "BW")].b == (900.0,)
    assert found[("-KB 64 -bcopy", "BW")].a == found[("-KB 64 -bcopy", "BW")].b == (500.0,)
    assert found[("-spinWait", "loops/s")].b == (100.0,)
    assert ("-spinWait", "BW") not in found                  # a spinner moves no bandwidth


def test_options_that_change_the_work_make_another_test_and_it_is_listed_never_summed():
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = document("-n 8 -MB 4 -load -KB 128 -bcopy -spinWait",
                 {"load": 1000, "bcopy": 300, "spinWait": 100})
    found = compare.compare(a, b)
    assert found.only_a == ("-KB 64 -bcopy [process 0]",)
    assert found.only_b == ("-KB 128 -bcopy [process 0]",)
    total = by_figure(found)[("Total (matched tests)", "system BW")]
    assert total.a == total.b == (1000.0,)                   # the load only: bcopy not summed


def test_how_a_test_runs_is_not_what_it_is():
    a = document("-p 2 -n 8 -MB 4 -load", {"load": 1000})
    b = document("-p 2 -affinityNumber 0 -sample 3 -n 8 -MB 4 -load", {"load": 800})
    found = compare.compare(a, b)
    assert not found.only_a and not found.only_b
    assert [c.b for c in found.changes if c.figure in ("BW", "system BW")] == \
        [(800.0,), (800.0,), (1600.0,)]


def test_single_runs_cannot_tell_a_change_from_noise_and_never_fail(tmp_path):
    a = write(document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100}), tmp_path / "a.json")
    b = write(document(PLAN, {"load": 600, "bcopy": 500, "spinWait": 100}), tmp_path / "b.json")
    r = run_cli("compare", a, b, "--fail-on-regression")
    assert r.returncode == 0, r.stderr
    assert "-n 8 -MB 4 -load [process 0], BW, 1000.0 (one run: no spread measured), 600.0 (one " \
           "run: no spread measured), MB/s, -40.0% worse, cannot be told from noise (one run: " \
           "use -repeat)" in r.stdout
    assert r.stdout.rstrip().endswith("no change can be told from noise (run both with -repeat N)")


SAME = [{"load": v, "bcopy": 500 + d, "spinWait": 100} for v, d in
        ((1000, 3), (985, -2), (1012, 0), (995, 4), (1008, -5))]
SLOWER = [{**mb, "load": mb["load"] * 0.7} for mb in SAME]        # a planted 30% slowdown


def test_repeated_runs_of_one_plan_are_not_significant(tmp_path):
    a = write(repeated(PLAN, SAME), tmp_path / "a.json")
    b = write(repeated(PLAN, SAME[1:] + SAME[:1]), tmp_path / "b.json")
    r = run_cli("compare", a, b, "--fail-on-regression")
    assert r.returncode == 0, r.stderr
    assert "A: " in r.stdout and "5 repetitions" in r.stdout
    assert "significant changes beyond 5% (Holm, family of 2): 0 worse, 0 better; 2 not " \
           "significant" in r.stdout
    load = next(ln for ln in r.stdout.splitlines() if ln.startswith("-n 8 -MB 4 -load [process 0], BW"))
    assert load == "-n 8 -MB 4 -load [process 0], BW, 1000.0 (sd 10.7; CV 1.1%), 1000.0 (sd 10.7; " \
                   "CV 1.1%), MB/s, +0.0% not significant (95% CI -1.6% to +1.6%; Welch's t, p = 1)"


def test_a_planted_30_percent_slowdown_is_significant_and_fails_on_regression(tmp_path):
    a = write(repeated(PLAN, SAME), tmp_path / "a.json")
    b = write(repeated(PLAN, SLOWER), tmp_path / "b.json")
    r = run_cli("compare", a, b, "--fail-on-regression")
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == \
        f"torque-async: --fail-on-regression: exit 1: {b}: 1 significant regression"
    assert "-n 8 -MB 4 -load [process 0], BW, 1000.0 (sd 10.7; CV 1.1%), 700.0 (sd 7.5; CV 1.1%), " \
           "MB/s, -30.0% worse (95% CI -31.4% to -28.7%; Welch's t, p = 1.8e-10)\n" in r.stdout
    assert "-30.0% worse (95% CI -31.4% to -28.7%; Welch's t, p = 1.8e-10; decided with its BW: " \
           "one measurement)\n" in r.stdout                                 # (IO/s)
    assert "family: Holm's correction over 2 findings at 5% family-wise" in r.stdout
    assert "significant changes beyond 5% (Holm, family of 2): 1 worse, 0 better" in r.stdout
    # (one finding: BW and IO/s are one measurement, the Total no test)
    assert run_cli("compare", b, a, "--fail-on-regression").returncode == 0   # B faster
    assert run_cli("compare", a, b, "--threshold", "40", "--fail-on-regression").returncode == 0


def test_a_run_that_did_not_finish_is_named_its_tests_marked_and_it_fails_the_gate(tmp_path):
    """B failed and cut one test short: compare compared them as whole measurements (a -bcopy
    stopped after 0.1 s read as 90% slower, significant) and --fail-on-regression passed."""
    a = repeated(PLAN, SAME)
    b = repeated(PLAN, SAME)
    bcopy, spin = b["repeats"]["runs"][1]["tests"][1], b["repeats"]["runs"][1]["tests"][2]
    bcopy["record"]["whole"] = False
    bcopy["figures"]["bw"] = 50.0
    spin["record"]["error"], spin["state"] = "planted", "failed"
    cut = "repetition 2 of 5: test 1 (-bcopy, group 1, process 0) stopped while running: " \
        "measured until a failure stopped the run"
    b |= {"failures": ["repetition 2 of 5: test 2 (-spinWait, group 2, process 0) failed: "
                       "planted"], "cut_short": [cut], "interrupted": None}
    found = by_figure(compare.compare(a, b))
    assert found[("-KB 64 -bcopy", "BW")].unfinished == ("cut short in B",)
    assert found[("-spinWait", "loops/s")].unfinished == ("failed in B",)
    assert found[("-n 8 -MB 4 -load", "BW")].unfinished == ()
    assert not any(c.regression(5) for c in found.values())
    paths = write(a, tmp_path / "a.json"), write(b, tmp_path / "b.json")
    r = run_cli("compare", *paths, "--fail-on-regression")
    assert r.returncode == 1, r.stderr
    assert f"note: B did not finish: {cut}\n" in r.stdout
    assert "did not finish (cut short in B)" in r.stdout
    assert "figures of tests that did not finish (failed, or cut short by a stop)" in r.stdout
    assert r.stderr.splitlines()[-1] == \
        f"torque-async: --fail-on-regression: exit 1: {paths[1]} did not finish"  # ('0 worse')
    r = run_cli("compare", *reversed(paths), "--fail-on-regression")
    assert r.returncode == 1 and r.stderr.splitlines()[-1] == \
        f"torque-async: --fail-on-regression: exit 1: {paths[1]} (BASE) did not finish"
    assert "note: A did not finish: " in run_cli("compare", *reversed(paths)).stdout   # (BASE)


def test_a_test_that_died_before_it_published_is_named_and_the_total_marked(tmp_path):
    """It had no figures: no line said so, and the Total read 100% worse for it, unmarked."""
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100}, dead="bcopy")
    assert b["tests"][1]["table"] is None
    found = compare.compare(a, b)
    assert found.unmeasured == ("-KB 64 -bcopy [process 0]: did not finish (failed in B)",)
    total = by_figure(found)[("Total (matched tests)", "system BW")]
    assert total.unfinished == ("failed in B",) and not total.regression(5)
    text = compare.lines(found, (a, b), ("a.json", "b.json"), 5)
    assert "no figures to compare: -KB 64 -bcopy [process 0]: did not finish (failed in B)" in text


def test_a_series_is_each_run_against_the_base(tmp_path):
    base = write(repeated(PLAN, SAME), tmp_path / "base.json")
    one = write(repeated(PLAN, SAME), tmp_path / "one.json")
    two = write(repeated(PLAN, SLOWER), tmp_path / "two.json")
    r = run_cli("compare", base, one, two)
    assert r.returncode == 0
    blocks = r.stdout.split("\n\nA: ")
    assert len(blocks) == 2 and f"B: {two}" in blocks[1] and f"B: {one}" in blocks[0]
    assert "0 worse" in blocks[0] and "1 worse" in blocks[1]


def test_latency_up_is_worse_and_timer_and_stream_figures_are_compared():
    a, b = (document("-n 64 -cyclic 1000", {"cyclic": 1}) for _ in range(2))
    a["tests"][0]["latency"] = {"min": 1, "avg": 5000, "p50": 4000, "p99": 20_000, "p999": 0,
                                "max": 90_000}
    b["tests"][0]["latency"] = {**a["tests"][0]["latency"], "p99": 40_000, "max": 60_000}
    found = by_figure(compare.compare(a, b))
    p99, top = found[("-n 64 -cyclic 1000", "lateness p99")], found[("-n 64 -cyclic 1000",
                                                                       "lateness max")]
    assert (p99.a, p99.b, p99.worse(5), top.better(5)) == ((20.0,), (40.0,), True, True)
    assert ("-n 64 -cyclic 1000", "BW") not in found


def test_runs_from_different_machines_are_noted():
    other = INFO.__class__(**{**INFO.__dict__, "hostname": "elsewhere"})
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100}, info=other)
    assert compare.provenance(a, b)[0].startswith("note: different machines: host")


def test_runs_whose_tests_had_other_neighbours_are_noted():
    """bcopy beside one load (A) and beside two (B) read -33% worse, a significant regression,
    with nothing saying the plans differ; a reordered plan is the same plan."""
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    assert compare.provenance(a, document(REORDERED, {"load": 1000, "bcopy": 500,
                                                      "spinWait": 100})) == []
    more = "-n 8 -MB 4 -p 2 -load -KB 64 -bcopy -spinWait"
    b = document(more, {"load": 1000, "bcopy": 300, "spinWait": 100})
    assert compare.provenance(a, b) == [
        "note: the plans differ (A: -n 8 -MB 4 -load -KB 64 -bcopy -spinWait -slow; B: -n 8 -MB 4 "
        "-p 2 -load -KB 64 -bcopy -spinWait -slow): a test's neighbours are not the same, so a change may "
        "be the plan's, not the system's"]
    said = document("-slow " + PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    assert compare.provenance(a, said) == []        # -slow is the default of several tests
    one, fast_one = (document(f"{x}-n 8 -MB 4 -load", {"load": 1000}) for x in ("", "-fast "))
    assert compare.provenance(one, fast_one) == []  # and -fast of one
    fast = document("-fast " + PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    assert compare.provenance(a, fast)[0].endswith("-spinWait -fast): a test's neighbours are "
                                                   "not the same, so a change may be the plan's, "
                                                   "not the system's")


def test_runs_made_with_another_engine_priority_or_verbosity_are_noted():
    """The same plan with -engine threads against the default read as the system's change."""
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = document("-engine threads -rtprio 50 " + PLAN, {"load": 1000, "bcopy": 500,
                                                        "spinWait": 100})
    assert compare.provenance(a, b) == [
        "note: the runs were made differently (-engine auto in A, threads in B; -rtprio None in "
        "A, 50 in B): a change may be that choice's, not the system's"]
    assert compare.provenance(a, document("-v " + PLAN, {"load": 1000, "bcopy": 500,
                                                          "spinWait": 100}))[0].startswith(
        "note: the runs were made differently (-vl 0 in A, 1 in B)")
    seeded = document("-seed 7 " + PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    assert compare.provenance(a, seeded) == []       # what it does, not how: -seed is not noted


def test_a_baseline_stopped_in_a_run_alone_is_noted_as_alone():
    """Its figures are a group's alone: compared with a run together as like for like."""
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = {**a, "stopped_alone": 1}
    assert compare.provenance(a, b) == [
        "note: B is a -baseline run stopped in group 1's run alone: its figures are that "
        "group's alone, not measured together"]
    assert compare.provenance(a, a) == []


@pytest.mark.parametrize("content, message", [
    ("", "is not JSON"), ('{"schema": "torque-async-results", "schema_version": 99}',
                          "has results schema version 99"),
    ("[1, 2]", "is not a torque-async results file"),
    ('{"schema": ' + "9" * 5_000_000 + "}",          # int()'s digit limit: the file unnamed
     "bad.json is not a torque-async results file: Exceeds the limit (4300 digits) for integer "
     "string conversion: value has 5000000 digits\n")], ids=["empty", "version", "list", "digits"])
def test_unreadable_results_exit_2_with_one_line(tmp_path, content, message):
    good = write(document(PLAN, {"load": 1, "bcopy": 1, "spinWait": 1}), tmp_path / "a.json")
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = run_cli("compare", good, str(bad))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and message in r.stderr


def test_nan_threshold_is_refused(tmp_path):
    a = write(document(PLAN, {"load": 1, "bcopy": 1, "spinWait": 1}), tmp_path / "a.json")
    r = run_cli("compare", a, a, "--threshold", "nan")
    assert r.returncode == 2 and "nan" in r.stderr


def test_a_real_repeat_run_is_read_repetition_by_repetition(tmp_path):
    r = run_cli("-smkey", "0x7A611", "-repeat", "3", "-json", "a.json", "-n", "4", "-i", "1",
                "-KB", "64", "-load", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    doc = export.load(str(tmp_path / "a.json"))
    assert len(compare.repetitions(doc)) == 3
    same = run_cli("compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert "3 repetitions" in same.stdout and "0 worse, 0 better" in same.stdout


def test_compare_takes_the_unrounded_figures_as_the_repeat_block_does():
    test = {"family": "file", "table": {"bw": 1.4, "iops": 350},
            "figures": {"bw": 1.3691, "iops": 350.51}, "record": {}}
    got = compare.figures(test)
    assert got["IO/s"][2] == 350.51 and got["BW"][2] == 1.3691
    dead = {"family": "file", "table": None, "figures": {"bw": None, "iops": None}}
    assert compare.figures(dead)["BW"] == ("MB/s", True, None)     # it published no row


def test_a_regression_of_figures_not_resolved_is_flagged_and_never_fails(tmp_path):
    """The planted 30% slowdown again, its tests flagged 'short' on one side: each of their
    figures says so, and --fail-on-regression does not fail on them."""
    slow = repeated(PLAN, SLOWER)
    for run in slow["repeats"]["runs"]:
        for test in run["tests"]:
            test["flags"] = ["short"]
    a, b = write(repeated(PLAN, SAME), tmp_path / "a.json"), write(slow, tmp_path / "b.json")
    r = run_cli("compare", a, b, "--fail-on-regression")
    assert r.returncode == 0, r.stdout
    assert "-30.0% worse (95% CI -31.4% to -28.7%; Welch's t, p = 1.8e-10); not resolved " \
           "(short)\n" in r.stdout
    assert "figures not resolved on one side or both" in r.stdout
    assert "(Holm, family of 2): 0 worse, 0 better" in r.stdout   # (counted 'worse' while not
                                                                  # resolved)


def test_a_group_of_another_process_count_is_compared_whole():
    """-p 1 against -p 4: process 0 alone did a quarter of B's work, and read as 60% worse
    while the group made 1.6 times the bandwidth."""
    plan_a, plan_b = (cmdline.parse(f"-p {p} -n 8 -MB 4 -load".split()) for p in (1, 4))
    lat = ([1000] * 99 + [9000], *([2000 * (k + 1)] * 100 for k in range(4)))
    a = export.document(plan_a, (record(0, 0, 1000 * MS, 1000, 2**20, hist=hist_of(*lat[0]),
                                        lat_count=100, lat_min=1000, lat_max=9000,
                                        lat_sum=sum(lat[0])),), plan_a.procs(), INFO, "a")
    recs = tuple(record(k, 0, 1000 * MS, 400, 2**20, hist=hist_of(*lat[k + 1]), lat_count=100,
                        lat_min=lat[k + 1][0], lat_max=lat[k + 1][0], lat_sum=sum(lat[k + 1]))
                 for k in range(4))
    b = export.document(plan_b, recs, plan_b.procs(), INFO, "b")
    found = compare.compare(a, b)
    assert not found.only_a and not found.only_b
    group = "-p 1 -n 8 -MB 4 -load"                        # as A names it
    got = {c.figure: c for c in found.changes if c.test.startswith(group)}
    assert {c.test for c in got.values()} == {f"{group} [1 process in A, 4 in B]"}
    assert got["BW"].b == (4 * 400.0,) and got["BW"].better(5)
    assert got["IO/s"].b == (sum(t["figures"]["iops"] for t in b["tests"]),)
    merged = merge(r.lat for r in recs)
    assert got["latency p99"].b == (merged.percentile(0.99) / 1000,)
    assert got["latency p99"].a[0] < 10                    # A's own: 99 of 100 at 1 us
    (total,) = [c for c in found.changes if c.test.startswith("Total")]
    assert total.b == (4 * 400.0,)


def test_late_frames_from_none_are_worse_and_nothing_matched_says_so(tmp_path):
    a, b = (document("-n 64 -cyclic 1000", {"cyclic": 1}) for _ in range(2))
    few = compare.Change("t", "sub 0 late", "frames", False, (0, 0, 0), (3, 4, 2))
    assert few.worse(5) and not few.regression(5)     # 3 against 3: Mann-Whitney's p >= 0.1
    assert few.verdict(5).startswith("from 0 (+3 frames) not significant (95% CI ")
    change = compare.Change("t", "sub 0 late", "frames", False, (0,) * 6, (3, 4, 2, 3, 5, 4))
    assert change.worse(5) and change.regression(5)
    assert change.verdict(5).startswith("from 0 (+3.5 frames) worse (95% CI +")
    assert compare.Change("t", "late", "frames", False, (0,), (0,)).verdict(5) == \
        "no change (0 on both sides)"
    other = write(document(PLAN, {"load": 1, "bcopy": 1, "spinWait": 1}), tmp_path / "b.json")
    r = run_cli("compare", write(a, tmp_path / "a.json"), other)
    assert r.returncode == 2
    assert r.stdout.rstrip().endswith("nothing compared: no test of A matches one of B (tests "
                                      "match by action, arguments and the local options that "
                                      "change the work; --match position matches them "
                                      "by group and process)")


def test_real_stream_results_compare_by_sub_stream(tmp_path):
    """A stream's sub-streams' histograms are [lowest, highest ns, count]: compare read them
    as pairs and raised ValueError."""
    r = run_cli("-smkey", "0x7A612", "-json", "s.json", "-memStreams", "rw", "2", "64", "62.5",
                "0", "0.05", "1", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    same = run_cli("compare", str(tmp_path / "s.json"), str(tmp_path / "s.json"))
    assert same.returncode == 0, same.stderr
    doc = export.load(str(tmp_path / "s.json"))
    subs = doc["tests"][0]["streams"]
    late = [ln for ln in same.stdout.splitlines() if ", sub 0 lateness p99, " in ln]
    assert len(late) == 1 and late[0].split(", ")[2] == \
        f"{subs['sub0']['lateness_p99'] / 1000:.1f} (one run: no spread measured)"


def test_a_spinwait_with_no_rate_alone_still_compares_its_loops():
    """(-baseline stopped in its run alone: no idle rate, so no spin block.) compare found no
    figure and said it did not finish, though it had measured its loops."""
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 50})
    b["tests"][2]["spin"] = None
    assert compare.figures(b["tests"][2])["loops/s"] == ("Mloops/s", True, 50.0)
    assert by_figure(compare.compare(a, b))[("-spinWait", "loops/s")].pct == -50.0


def test_a_rate_s_change_is_its_means_the_test_s_own():
    """The change shown was the medians' while Welch's test was of the means: B's median rose
    9.5% while its mean fell 13.7% (18 repetitions at 110, 12 at 50), and compare called it a
    significant improvement. The change shown is now the tested one: the means'."""
    a = tuple(100.0 + 0.1 * (i % 10) for i in range(30))
    b = (110.0,) * 18 + (50.0,) * 12
    change = compare.Change("0 Bcopy", "BW", "MB/s", True, a, b)
    assert change.pct == pytest.approx(100 * (86 - 100.45) / 100.45)
    assert change.verdict(5).startswith("-14.4% worse (95% CI ")
    assert not change.better(5) and change.regression(5)
