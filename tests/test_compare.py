"""torque-async compare on two crafted results files: matching, changes, marks, exit codes."""
from __future__ import annotations

import json

from torque_async import cmdline, compare, export

from conftest import run_cli
from test_report import INFO, MS, record

PLAN_A = "-load -bcopy -spinWait"
PLAN_B = "-load -bcopy -spinWait -bzero"


def crafted(argv: str, load_mb: int, bcopy_mb: int, loops: float, path) -> str:
    """A results file whose tests moved these many MB in one second each."""
    plan = cmdline.parse(argv.split())
    recs = [record(0, 0, 1000 * MS, load_mb, 2**20), record(1, 0, 1000 * MS, bcopy_mb, 2**20,
                                                            sys_factor=2),
            record(2, 0, 1000 * MS, 10, 0, ops=int(loops), ref_rate=2 * loops)]
    recs += [record(3, 0, 1000 * MS, 7, 2**20)] * (len(plan.groups) - 3)
    doc = export.document(plan, tuple(recs), plan.procs(), INFO, argv)
    path.write_text(json.dumps(doc))
    return str(path)


def test_tests_are_matched_by_group_and_kind_and_changes_marked_beyond_the_threshold(tmp_path):
    a = crafted(PLAN_A, 1000, 500, 100e6, tmp_path / "a.json")
    b = crafted(PLAN_B, 900, 510, 120e6, tmp_path / "b.json")
    r = run_cli("compare", a, b)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"A: {a} ({PLAN_A}): torque-async {PLAN_A}"
    assert lines[3:9] == ["test, kind, A, B, unit, change",
                          "group 0 proc 0, Load, 1000.0, 900.0, MB/s, -10.0% slower",
                          "group 1 proc 0, Bcopy, 500.0, 510.0, MB/s, +2.0%",
                          "group 2 proc 0, SpinWait, 100.0, 120.0, Mloops/s, +20.0% faster",
                          "group 3 proc 0, Bzero, -, 7.0, MB/s, only in B",
                          "Total, all, 2000.0, 1927.0, MB/s, -3.6%"]
    assert lines[-1] == "changes beyond 5% marked: 1 slower, 1 faster"


def test_fail_on_regression_exits_1_only_when_b_is_slower_beyond_the_threshold(tmp_path):
    a = crafted(PLAN_A, 1000, 500, 100e6, tmp_path / "a.json")
    b = crafted(PLAN_A, 900, 500, 100e6, tmp_path / "b.json")
    assert run_cli("compare", a, b, "--fail-on-regression").returncode == 1
    wide = run_cli("compare", a, b, "--threshold", "15", "--fail-on-regression")
    assert wide.returncode == 0 and "MB/s, -10.0%\n" in wide.stdout
    assert run_cli("compare", b, a, "--fail-on-regression").returncode == 0     # B faster
    assert run_cli("compare", a, b).returncode == 0                               # not asked


def test_the_total_alone_can_regress(tmp_path):
    a = crafted(PLAN_A, 1000, 500, 100e6, tmp_path / "a.json")
    b = crafted(PLAN_A, 960, 450, 100e6, tmp_path / "b.json")     # -4% and -10%: total -7%
    found = compare.changes(export.load(a), export.load(b))
    assert [round(c.pct, 1) for c in found] == [-4.0, -10.0, 0.0, -7.0]
    assert [c.slower(8.0) for c in found] == [False, True, False, False]
    assert not any(c.slower(10.0) or c.faster(0.0) for c in found)


def test_unreadable_files_exit_2_with_one_line(tmp_path):
    a = crafted(PLAN_A, 1000, 500, 100e6, tmp_path / "a.json")
    r = run_cli("compare", a, str(tmp_path / "missing.json"))
    assert r.returncode == 2
    assert r.stderr.strip() == f"torque-async: error: cannot read {tmp_path / 'missing.json'}: " \
                               "No such file or directory"


def test_streams_are_compared_by_late_and_dropped_frames_and_lateness_p99(tmp_path):
    from dataclasses import replace
    from test_streams_report import sub
    plan = cmdline.parse("-memStreams rw 2 1024 100 0 2 64 -seed 1".split())
    docs = []
    for late in ([5000] * 4, [1000, 2000, 3000]):
        rec = record(0, 0, 2000 * MS, 400, 1024 * 1024, sys_factor=2,
                     subs=(sub(200, []), replace(sub(200, late), dropped=len(late) - 3)))
        docs.append(export.document(plan, (rec,), plan.procs(), INFO, "today"))
    (name, texts, worse), = [c for c in compare.stream_changes(*docs) if "write" in c[0]]
    assert name == "group 0 proc 0 sub 1 write t0" and not worse      # 4 -> 3 late, 1 -> 0
    assert texts[:3] == ["MISSED -> MISSED", "late frames 4 -> 3", "dropped frames 1 -> 0"]
    (_, _, worse), = [c for c in compare.stream_changes(*docs[::-1]) if "write" in c[0]]
    assert worse
    text = "\n".join(compare.lines(compare.changes(*docs), tuple(docs), ("a", "b"), 5))
    assert "late frames 4 -> 3" in text and "streams, A -> B:" in text
