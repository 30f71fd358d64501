"""compare --interleave: two plans run alternately (A B A B ...), assembled as two -repeat
documents and compared; plans that name what interleaving decides are refused."""
from __future__ import annotations

import pytest

from torque_async import compare, interleave

from conftest import run_cli
from test_compare import PLAN, SAME, SLOWER, document


def test_the_runs_alternate_and_each_side_keeps_its_runs_in_order():
    ran = []

    def run_one(label, k):
        ran.append((label, k))
        return document(PLAN, (SAME if label == "A" else SLOWER)[k])
    a, b = interleave.series(5, run_one)
    assert ran == [("A", 0), ("B", 0), ("A", 1), ("B", 1), ("A", 2), ("B", 2), ("A", 3),
                   ("B", 3), ("A", 4), ("B", 4)]
    assert [rep[0]["figures"]["bw"] for rep in compare.repetitions(a)] == \
        [mb["load"] for mb in SAME]
    assert a["repeats"]["count"] == 5 and a["command"].endswith("(interleaved: 5 runs)")
    load = next(c for c in compare.compare(a, b).changes if c.figure == "BW")
    assert load.regression(5) and load.b == tuple(float(int(mb["load"])) for mb in SLOWER)


def test_a_failed_run_s_lines_reach_the_side_it_belongs_to():
    docs = [document(PLAN, SAME[0]), {**document(PLAN, SAME[1]), "failures": ["test 0 failed"],
                                      "interrupted": "SIGTERM"}]
    got = interleave.repeated(docs)
    assert got["failures"] == ["test 0 failed"] and got["interrupted"] == "SIGTERM"
    assert compare.incomplete(got, "A")[0] == "note: A did not finish: interrupted by SIGTERM"


@pytest.mark.parametrize("plan, named", [("-n 4 -load -json x.json", "-json"),
                                         ("-repeat 3 -n 4 -load", "-repeat"),
                                         ("-baseline -n 4 -load", "-baseline")])
def test_a_plan_naming_what_interleaving_decides_is_refused(plan, named):
    r = run_cli("compare", "--interleave", "2", "--", plan, "-n 4 -load")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"{named} is --interleave's to decide" in r.stderr


def test_a_plan_that_does_not_parse_is_refused_before_any_run(tmp_path):
    """A dangling local option in plan B was found only after plan A's first run, and the
    compare exited 1 as if a run had failed."""
    r = run_cli("compare", "--interleave", "2", "--", "-n 4 -load", "-n 4 -load -p 2",
                cwd=str(tmp_path))
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "'-n 4 -load -p 2'" in r.stderr and "local options without an action" in r.stderr
    assert "run 1 of" not in r.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("plan, named", [("-n 4 -load -quit", "-quit"), ("-h -n 4 -load", "-h"),
                                         ("-child 0 -n 4 -load", "-child")])
def test_a_plan_that_measures_nothing_is_refused(plan, named):
    r = run_cli("compare", "--interleave", "2", "--", "-n 4 -load", plan)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"{named} makes a run that measures nothing" in r.stderr


def test_a_bad_plan_b_is_refused_before_plan_a_runs():
    r = run_cli("compare", "--interleave", "2", "--", "-n 4 -load", "-n 4 -bogus")
    assert r.returncode == 2 and r.stdout == ""
    assert "run 1 of 2 of A" not in r.stderr                 # refused before any run
    assert r.stderr.strip().splitlines() == [
        "torque-async: error: compare --interleave: plan B ('-n 4 -bogus') is refused: "
        "unknown option -bogus"]


def test_interleave_needs_two_plans():
    r = run_cli("compare", "--interleave", "2", "--", "-n 4 -load", "-n 4 -load", "-n 4 -load")
    assert r.returncode == 2 and "give two plans" in r.stderr


def test_a_real_interleaved_compare(tmp_path):
    r = run_cli("compare", "--interleave", "2", "--", "-smkey 0x7A386 -n 4 -KB 64 -load",
                "-smkey 0x7A386 -n 4 -KB 64 -load", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert [ln.split(": torque-async")[0] for ln in r.stderr.splitlines()] == [
        "compare --interleave: run 1 of 2 of A", "compare --interleave: run 1 of 2 of B",
        "compare --interleave: run 2 of 2 of A", "compare --interleave: run 2 of 2 of B"]
    assert "A: plan A (" in r.stdout and "2 repetitions): torque-async -smkey 0x7A386 -n 4 -KB " \
        "64 -load (interleaved: 2 runs)" in r.stdout
    assert "(Holm, family of " in r.stdout


def test_a_signal_ends_the_run_under_way_and_the_series(tmp_path):
    import signal
    import subprocess
    import sys
    import psutil
    from conftest import ENV
    proc = subprocess.Popen([sys.executable, "-m", "torque_async", "compare", "--interleave", "2",
                             "--", "-smkey 0x7A387 -t 60 -KB 64 -load", "-t 60 -KB 64 -load"],
                            cwd=str(tmp_path), env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().startswith("compare --interleave: run 1 of 2 of A")
    children = psutil.Process(proc.pid).children()   # (said once the run was started)
    assert len(children) == 1
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM and out == ""
    assert err.strip().splitlines()[-1] == ("torque-async: error: compare --interleave: "
                                            "interrupted by SIGTERM: nothing compared")
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    assert not list(tmp_path.iterdir())              # no scratch left in the working directory
