"""JSON and CSV: the documented schema, real runs validated against it, and the text report,
the JSON and the CSV telling the same figures."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import field, fields, make_dataclass, replace

import jsonschema
import pytest

from torque_async import cmdline, export, figures
from torque_async.results import FAILED, Record
from torque_async.stats import bucket
from torque_async.sysinfo import SysInfo

from conftest import run_cli, table
from test_report import INFO, MS, hist_of, man_page_example, record

SCHEMA = export.schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
WHERE = "torque_async/schema/results.schema.json"


def test_the_schema_is_a_valid_versioned_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema_version"]["const"] == export.SCHEMA_VERSION
    assert SCHEMA["properties"]["schema"]["const"] == export.SCHEMA_NAME
    assert SCHEMA["$id"].endswith(f":{export.SCHEMA_VERSION}")


@pytest.mark.parametrize("what, names, where", [
    ("results row (results.Record)", [f.name for f in fields(Record)], "record"),
    ("SysInfo", [f.name for f in fields(SysInfo)], "system"),
    ("derived figure (export.FIGURES)", list(export.FIGURES), "test")])
def test_every_field_is_documented_in_the_schema(what, names, where):
    documented = SCHEMA["$defs"][where]["properties"]
    missing = [n for n in names if n not in documented]
    assert not missing, f"document the {what} field(s) {missing} in {WHERE} under $defs/{where}"
    assert set(names) - ADDED_WITHIN_V3 <= set(SCHEMA["$defs"][where]["required"])


# documented, not required: older v3 documents lack them
ADDED_WITHIN_V3 = {"launched", "setup_ns", "whole", "cpu_wait", "wait_pct", "checked", "unproved",
                   "check", "ran", "sched"}


def test_a_crafted_run_validates_and_carries_the_report_s_figures():
    plan, recs = man_page_example()
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    VALIDATOR.validate(doc)
    assert doc["time_zero_ns"] == 1000 * MS
    assert doc["overlap"] == {"start_ns": 64 * MS, "end_ns": 902 * MS + 400_000, "tests": 2,
                              "together": True}
    t0, t1 = doc["tests"]
    assert (t0["table"]["diff_ms"], t0["kind"]) == (902, "Load")
    assert t0["table"]["bw"] == pytest.approx(354.6, abs=0.05)
    assert t1["table"]["start_ms"] == 64 and t1["record"]["start"] == 1064 * MS
    assert round(doc["bandwidth"]["total"]) == 714 and list(doc["bandwidth"]["groups"]) == ["Load"]
    group = doc["plan"]["groups"][0]
    assert group["locals"]["n"] == 8 and group["processes"] == 2
    assert doc["plan"]["settings"]["seed"] == 1 and doc["system"]["ethernet"] == INFO.ethernet


def test_a_failed_test_with_nothing_measured_still_validates():
    plan = cmdline.parse(["-bzero"])
    rec = record(0, 0, 0, 0, 4096, state=FAILED, error="boom")
    doc = export.document(plan, (rec,), plan.procs(), INFO, "today", ("test 0 failed: boom",))
    VALIDATOR.validate(doc)
    (test,) = doc["tests"]
    assert (test["state"], test["latency"], test["record"]["error"]) == ("failed", None, "boom")
    assert doc["overlap"] is None and doc["failures"] == ["test 0 failed: boom"]


def test_repeat_stopped_after_its_first_repetition_still_exports_that_one():
    """-repeat 3 stopped in its second: `repeats` was null, as if no -repeat was asked, while
    the report said 'after 1 complete repetition'."""
    plan = cmdline.parse("-repeat 3 -n 8 -load".split())
    recs = (record(0, 0, 900 * MS, 8, 4 << 20),)
    doc = export.document(plan, recs, plan.procs(), INFO, "today", (), [recs],
                          interrupted=2, cut_short=("repetition 2 of 3: test 0 stopped",))
    VALIDATOR.validate(doc)
    assert doc["repeats"]["count"] == len(doc["repeats"]["runs"]) == 1
    assert doc["repeats"]["runs"][0]["tests"] == \
        [{k: v for k, v in t.items() if k != "alone"} for t in doc["tests"]]
    once = cmdline.parse("-n 8 -load".split())
    assert export.document(once, recs, once.procs(), INFO, "today", (), [recs])["repeats"] is None


def test_histograms_are_sparse_upper_bounds_and_phases_are_named():
    lats = [900, 900, 50_000]
    rec = record(0, 0, MS, 3, 64, hist=hist_of(*lats), lat_count=3, lat_min=900, lat_max=50_000,
                 lat_sum=51_800, phase=(1, 2, 3, 4, 5))
    out = export.record_fields(rec)
    assert [n for *_, n in out["hist"]] == [2, 1]
    for (lo, hi, _), v in zip(out["hist"], (900, 50_000)):
        assert lo <= v <= hi and bucket(lo) == bucket(hi) == bucket(v) and hi - lo < v / 64
    assert out["phase"] == {"spawned": 1, "set_up": 2, "released": 3, "measured": 4, "done": 5}


def test_a_new_row_field_appears_in_the_json_and_the_schema_asks_for_it(monkeypatch):
    """Families add fields to the row; the export walks them without code, and validation
    fails until the schema documents them."""
    extended = make_dataclass("Record", [("new_max", int, field(default=7))],
                              bases=(Record,), frozen=True)
    monkeypatch.setattr(export, "Record", extended)
    plan = cmdline.parse(["-bzero"])
    base = record(0, 0, MS, 4, 64)
    rec = extended(**{f.name: getattr(base, f.name) for f in fields(Record)})
    doc = export.document(plan, (rec,), plan.procs(), INFO, "today")
    assert doc["histograms"] == ["hist"]
    assert doc["tests"][0]["record"]["new_max"] == 7
    with pytest.raises(jsonschema.ValidationError, match="new_max"):
        VALIDATOR.validate(doc)


def test_load_refuses_what_is_not_a_results_file(tmp_path):
    bad_json, other, old = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    bad_json.write_text("{")
    other.write_text(json.dumps({"hello": 1}))
    old.write_text(json.dumps({"schema": export.SCHEMA_NAME, "schema_version": 0}))
    for path, message in ((bad_json, "is not JSON"), (other, "not a torque-async results file"),
                          (old, "schema version 0"), (tmp_path / "none.json", "cannot read")):
        with pytest.raises(export.ResultsFileError, match=message):
            export.load(str(path))


def test_load_refuses_nan_and_infinity(tmp_path):
    """Python's json reads them: compare printed 'nan ... +nan%' and '+inf% better', exit 0."""
    plan, recs = man_page_example()
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    for word in ("NaN", "Infinity", "-Infinity", "1e400"):
        doc["tests"][0]["figures"]["bw"] = word
        path = tmp_path / f"{word}.json"
        path.write_text(export.json_text(doc).replace(f'"{word}"', word))
        with pytest.raises(export.ResultsFileError, match=f"it holds {word}, which is no JSON"):
            export.load(str(path))


def test_load_refuses_a_negative_figure(tmp_path):
    plan, recs = man_page_example()
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    doc["tests"][1]["figures"]["bw"] = -5.0
    path = tmp_path / "neg.json"
    path.write_text(export.json_text(doc))
    with pytest.raises(export.ResultsFileError, match=r"tests\[1\]\.figures\.bw is -5.0, below its "
                                                      r"least, 0"):
        export.load(str(path))


def test_load_refuses_a_repeat_count_that_is_not_its_runs(tmp_path):
    plan = cmdline.parse("-repeat 3 -n 8 -load".split())
    recs = (record(0, 0, 900 * MS, 8, 4 << 20),)
    doc = export.document(plan, recs, plan.procs(), INFO, "today", (), [recs, recs])
    doc["repeats"]["count"] = 5
    path = tmp_path / "r.json"
    path.write_text(export.json_text(doc))
    with pytest.raises(export.ResultsFileError, match="repeats.count is 5, but repeats.runs "
                                                      "holds 2"):
        export.load(str(path))


def test_load_refuses_a_test_of_a_group_the_plan_does_not_have(tmp_path):
    """A hand-edited group made compare fail with KeyError and plot with IndexError."""
    plan, recs = man_page_example()
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    path = tmp_path / "run.json"
    for group, why in ((1, "but the plan's groups are numbered 0 to 0"),
                       (-1, "below its least, 0")):              # the schema's minimum
        doc["tests"][1]["group"] = group
        path.write_text(json.dumps(doc))
        with pytest.raises(export.ResultsFileError, match=rf"tests\[1\]\.group is {group}, "
                                                          + why.replace("'", ".")):
            export.load(str(path))
    doc["tests"][1]["group"] = 0
    path.write_text(json.dumps(doc))
    assert export.load(str(path))["tests"][1]["group"] == 0


def test_csv_all_columns_are_the_schema_s_scalars_with_units_whatever_the_run():
    plan, recs = man_page_example()
    recs = (replace(recs[0], info="line one\nline two", lat_count=1, lat_min=1500, lat_max=1500,
                    lat_sum=1500), recs[1])
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    text = export.csv_text(doc, everything=True)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["repetition", *(c.name for c in export.csv_columns())]
    assert "table.bw (MB/s)" in rows[0] and "spin.kept_pct (%)" in rows[0]
    assert "record.hist" not in " ".join(rows[0])
    assert len(rows) == 3 and all(len(r) == len(rows[0]) for r in rows)
    first = dict(zip(rows[0], rows[1]))
    assert first["spin.loops_per_s (loops/s)"] == ""          # a load test has no loop rate
    assert first["latency.max (us)"] == "1.5"                  # the text report's unit, not ns
    assert doc["tests"][0]["latency"]["max"] == 1500
    assert first["record.info"] == "line one | line two"       # one line per row
    assert text.count("\n") == 3
    assert [r[0] for r in rows[1:]] == ["1", "1"]
    alone = [figures.main_figures(r, p) for r, p in zip(recs, plan.procs())]    # -baseline
    many = export.document(replace(plan, settings=replace(plan.settings, repeat=2)), recs,
                           plan.procs(), INFO, "today", repetitions=[recs, recs], alone=alone)
    for everything in (True, False):                                  # every repetition's
        rows = list(csv.DictReader(io.StringIO(export.csv_text(many, everything))))
        assert [(r["repetition"], r["proc"]) for r in rows] == [("1", "0"), ("1", "1"),
                                                                  ("2", "0"), ("2", "1")]
        bw = next(k for k in rows[0] if k.startswith("alone.bw"))
        assert rows[0][bw] and [r[bw] for r in rows[2:]] == [r[bw] for r in rows[:2]]


def test_the_default_csv_has_the_report_s_columns_and_none_of_the_record_s():
    plan, recs = man_page_example()
    recs = (replace(recs[0], lat_count=1, lat_min=1500, lat_max=1500, lat_sum=1500), recs[1])
    doc = export.document(plan, recs, plan.procs(), INFO, "today")
    rows = list(csv.reader(io.StringIO(export.csv_text(doc))))
    head = rows[0]
    assert not [name for name in head if name.startswith("record.")]
    assert head[:8] == ["repetition", "proc", "group", "index", "action", "kind", "state",
                        "table.start_ms (ms)"]
    for name in ("table.bw (MB/s)", "table.xfers", "sys_bw (MB/s)", "latency.p99 (us)",
                 "cpu.busy_pct (%)", "check.values", "check.count",
                 "check.why"):
        assert name in head, name
    assert "table.proc" not in head and "table.test" not in head     # proc and kind say them
    # what no test of this run has is left out: spinWait's rates, streams, -baseline's alone
    # and together, hosts
    assert not [n for n in head if n.split(".")[0] in ("spin", "streams", "alone", "together",
                                                         "host", "rank", "record", "samples",
                                                         "rw")]
    first = dict(zip(head, rows[1]))
    assert first["latency.max (us)"] == "1.5" and first["check.count"] == "True"
    assert len(rows) == 3 and all(len(r) == len(head) for r in rows)
    alone = [figures.main_figures(r, p) for r, p in zip(recs, plan.procs())]    # -baseline
    both = export.document(plan, recs, plan.procs(), INFO, "today", alone=alone)
    (head, *_), = [list(csv.reader(io.StringIO(export.csv_text(both))))]
    assert "alone.bw (MB/s)" in head and "together.bw (MB/s)" in head
    assert head.index("alone.bw (MB/s)") < head.index("together.bw (MB/s)")


def parse_bw_line(out: str) -> dict[str, int]:
    lines = out.splitlines()
    i = next(j for j, ln in enumerate(lines) if ln.startswith("BW,"))
    return dict(zip(lines[i].split(", ")[1:], map(int, lines[i + 1].split(", ")[1:])))


def test_a_real_run_validates_and_text_json_and_csv_agree(tmp_path):
    r = run_cli("-smkey", "0x7501", "-json", "run.json", "-csv", "run.csv",
                "-n", "256", "-i", "1", "-KB", "64", "-sample", "31", "-bzero",
                "-n", "8", "-i", "2", "-MB", "1", "-Striad", "-n", "4", "-KB", "256", "-spinWait")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "run.json").read_text())
    VALIDATOR.validate(doc)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "run.csv").read_text())))
    text = table(r.stdout)
    assert len(doc["tests"]) == len(rows) == len(text) == 3
    for test, row, line in zip(doc["tests"], rows, text):
        t = test["table"]
        printed = [t["proc"], t["start_ms"], t["finish_ms"], t["diff_ms"], t["xfers"],
                   f"{t['bw']:.1f}", t["ts"], t["iops"], t["test"], t["file"], t["pid"]]
        assert line == [str(v) for v in printed]
        assert float(row["table.bw (MB/s)"]) == t["bw"] and int(row["table.xfers"]) == t["xfers"]
        assert row["check.values"] == row["check.count"] == "True" and row["check.why"] == ""
        assert test["check"] == {"values": True, "count": True, "why": None}
        assert not [name for name in row if name.startswith("record.")]
        assert row["kind"] == test["kind"] == t["test"] and row["state"] == "done"
    bzero, triad, spin = doc["tests"]
    assert sum(s["transfers"] for s in bzero["samples"]["intervals"]) == 256
    assert bzero["samples"]["every"] == 32 and triad["samples"]["every"] is None
    assert spin["spin"]["loops_per_s"] > 0 and triad["spin"] is None
    assert triad["sys_bw"] == pytest.approx(3 * triad["table"]["bw"], rel=1e-9)  # 3 arrays
    printed_bw = parse_bw_line(r.stdout)
    assert printed_bw == {k: round(v) for k, v in doc["bandwidth"]["groups"].items()} | \
        {"Total": round(doc["bandwidth"]["total"])}
    assert doc["command"].startswith("-smkey 0x7501 -json run.json")
    assert doc["stopped_alone"] is None                 # (-baseline stopped alone: its group)


def test_json_to_stdout_moves_the_text_report_to_stderr():
    r = run_cli("-smkey", "0x7502", "-json", "-", "-n", "4", "-i", "1", "-KB", "64", "-load")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    VALIDATOR.validate(doc)
    assert "Total Bandwidth Consumed" in r.stderr and doc["tests"][0]["table"]["xfers"] == 4
    c = run_cli("-smkey", "0x7503", "-csv", "-", "-nh", "-n", "4", "-i", "1", "-KB", "64", "-load")
    assert c.returncode == 0, c.stderr
    (row,) = csv.DictReader(io.StringIO(c.stdout))
    assert row["table.xfers"] == "4" and table(c.stderr)[0][4] == "4"


def test_csv_all_keeps_every_column_the_record_s_included(tmp_path):
    r = run_cli("-smkey", "0x7505", "-csv", "all.csv", "-csvAll", "-n", "4", "-i", "1", "-KB",
                "64", "-load")
    assert r.returncode == 0, r.stderr
    (row,) = csv.DictReader(io.StringIO((tmp_path / "all.csv").read_text()))
    assert list(row) == ["repetition", *(c.name for c in export.csv_columns())]
    assert row["record.transfers"] == "4" and row["check.count"] == "True"
    alone = run_cli("-smkey", "0x7505", "-csvAll", "-n", "4", "-KB", "64", "-load")
    assert alone.returncode == 2 and alone.stderr.strip() == \
        "torque-async: error: -csvAll widens -csv's columns: name the file with -csv FILE too"


@pytest.mark.parametrize("args, message", [
    (("-json", "-", "-csv", "-"), "-json and -csv both write to -"),
    (("-json", "no/such/dir/run.json"), "cannot write no/such/dir/run.json: no/such/dir is not a "
                                        "writable directory")])
def test_outputs_that_cannot_work_are_refused_before_the_run(args, message):
    r = run_cli("-smkey", "0x7504", *args, "-n", "4", "-KB", "64", "-load")
    assert r.returncode == 2 and r.stderr.strip() == f"torque-async: error: {message}"
    assert "proc,Start" not in r.stdout
