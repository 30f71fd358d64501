"""Results for machines: the JSON document and the CSV rows, pure functions of one run.

Each test's `record` walks every field of the results Record, so a new row field appears in
the JSON without code here (the schema test then asks for its documentation). The derived
figures come from FIGURES, each the same function the text report prints from. The layout is
the versioned JSON Schema in schema/results.schema.json. The CSV (-csv) has the report's
columns (REPORT_COLUMNS: the main table, latency, CPU, the data check, and where some test has
them spinWait's rates, the streams' figures and verdicts, -baseline's alone and together,
mpiexec's host and rank); -csvAll every scalar test property of that schema, flattened, so
its columns stay the same from run to run.
"""
from __future__ import annotations

import csv
import io
import json
import math
import signal
from dataclasses import asdict, dataclass, fields
from functools import cache
from pathlib import Path
from typing import Any, Callable

from . import __version__, figures, report
from .inputs import RESULTS_LIMIT, read_bounded
from .kinds import KINDS
from .plan import Group, Plan, Proc
from .results import MAX_SUBS, PHASES, SIZE_LAW, STATE_NAMES, Record
from .stats import Stats, bucket_range
from .sysinfo import SysInfo
from .units import mb_per_s
from .web import summary as web

SCHEMA_NAME = "torque-async-results"
SCHEMA_VERSION = 4                 # 2: bandwidth.groups; 3: histograms [lo, hi, count] (fio's); 4: web ops count resolved requests (ops_unresolved)
SCHEMA_PATH = Path(__file__).with_name("schema") / "results.schema.json"


class ResultsFileError(ValueError):
    """A results file that cannot be read or is not torque-async results; says which."""


def sparse(hist) -> list[list[int]]:
    """A histogram as [lowest ns, highest ns, count] of each of its non-empty buckets."""
    return [[*bucket_range(i), n] for i, n in hist]


def stats_fields(s: Stats) -> dict[str, Any]:
    return {**asdict(s), "hist": sparse(s.hist)}


# The record's latency histograms: each transfer's latency, and each sub-stream's lateness.
HISTOGRAMS = ("hist",)          # the document's "histograms" (subs[].hist, rw.*.hist besides)
ENCODE: dict[str, Callable[[Any], Any]] = {
    "hist": sparse,
    "phase": lambda marks: {p.replace(" ", "_"): t for p, t in zip(PHASES, marks)},
    "subs": lambda subs: [stats_fields(s) for s in subs],
    "rw": lambda parts: {name: stats_fields(s) for name, s in zip(report.RW, parts)} or None,
    "op_lat": lambda ops: [stats_fields(s) for s in ops],
    "size_law": lambda law: dict(zip(SIZE_LAW, law)) if law else None}


def record_fields(rec: Record) -> dict[str, Any]:
    """Every field of the record, ENCODE's fields in their readable form."""
    out = {}
    for f in fields(Record):
        encode, value = ENCODE.get(f.name), getattr(rec, f.name)
        out[f.name] = encode(value) if encode else value
    return out


def samples(rec: Record, proc: Proc, t0: int) -> dict[str, Any]:
    every = proc.group.local.sample
    return {"every": None if every is None else every + 1,
            "limit_reached": report.sampling_cut(rec),
            "intervals": [asdict(s) for s in report.sample_intervals(rec, t0)]}


def streams(rec: Record, proc: Proc, t0: int) -> dict[str, Any] | None:
    """A stream's verdict and its sub-streams as sub0..sub2 (fixed names: CSV columns)."""
    subs = report.sub_stream_figures(rec, proc)
    if not subs:
        return None
    return {"verdict": report.verdict_of(s.verdict for s in subs),
            **{f"sub{i}": asdict(subs[i]) if i < len(subs) else None for i in range(MAX_SUBS)}}


# The derived figures of one test process: name -> f(record, proc, time zero).
FIGURES: dict[str, Callable[[Record, Proc, int], Any]] = {
    "table": lambda rec, proc, t0: asdict(report.table_row(rec, proc, t0)) if rec.measured
    else None,
    "sys_bw": lambda rec, proc, t0: mb_per_s(rec.sys_bytes, rec.elapsed),
    "latency": lambda rec, proc, t0: report.latency_summary(rec),
    "spin": lambda rec, proc, t0: report.spin_rates(rec),
    "check": lambda rec, proc, t0: report.data_check(rec),
    "rw": lambda rec, proc, t0: report.rw_figures(rec),
    "cpu": lambda rec, proc, t0: report.cpu_figures(rec, proc),
    "flags": lambda rec, proc, t0: list(report.resolution_flags(rec)),
    "samples": samples,
    "streams": streams,
    "figures": lambda rec, proc, t0: figures.main_figures(rec, proc),
}


def process_entry(rec: Record, proc: Proc, t0: int) -> dict[str, Any]:
    kind = KINDS[proc.group.action]
    return {"proc": proc.row, "group": proc.group.index, "index": proc.index,
            "action": proc.group.action, "kind": kind.label, "family": kind.family,
            "state": STATE_NAMES[rec.state],
            **{name: figure(rec, proc, t0) for name, figure in FIGURES.items()},
            "record": record_fields(rec)}


def group_entry(group: Group, records, procs: tuple[Proc, ...]) -> dict[str, Any]:
    kind = KINDS[group.action]
    mine = [r for r, p in zip(records, procs) if p.group is group]
    return {"index": group.index, "action": group.action, "args": group.args,
            "kind": kind.label, "family": kind.family, "text": group.text, "origin": group.origin,
            "processes": len(mine), "locals": asdict(group.local),
            "summary": report.group_figures(mine), "web": web.group_summary(group, records, procs)}


def plain(value: Any) -> Any:
    """JSON's own types: tuples become lists (for json and for schema validation alike)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def run_entries(plan: Plan, records: tuple[Record, ...], procs: tuple[Proc, ...]) \
        -> dict[str, Any]:
    """One run's figures: time zero, every test, the overlap window, the event loop's busy
    share, the bandwidth."""
    t0 = report.time_zero(records)
    window = report.overlap_window(records)
    groups = report.group_bandwidths(plan, records, procs)
    overlap = None if window is None else {
        "start_ns": window[0] - t0, "end_ns": window[1] - t0, "tests": window[2],
        "together": window[1] > window[0]}
    return {"time_zero_ns": t0, "tests": [process_entry(r, p, t0) for r, p in zip(records, procs)],
            "overlap": overlap, "event_loop": report.loop_busy(records, procs),
            "bandwidth": {"groups": groups, "total": sum(groups.values())}}


def repeats_entry(plan: Plan, repetitions: list[tuple[Record, ...]],
                  procs: tuple[Proc, ...]) -> dict | None:
    """-repeat: every complete repetition's figures (one, when the second failed or was
    stopped; none when the first was: null), each test's median, min, max, spread, standard deviation and CV, and the
    BW: line's medians."""
    if plan.settings.repeat < 2 or not repetitions:
        return None
    runs = [run_entries(plan, records, procs) for records in repetitions]
    summary = [{"proc": p.row, "figure": name, "median": s.median, "min": s.lo, "max": s.hi,
                "spread_pct": s.spread_pct, "sd": s.sd, "cv_pct": s.cv_pct}
               for i, p in enumerate(procs)
               for name, s in figures.spreads([run["tests"][i]["figures"] for run in runs]).items()]
    groups, total = report.median_bandwidths(plan, repetitions, procs)
    return {"count": len(runs), "runs": runs, "summary": summary,
            "bandwidth": {"groups": groups, "total": total}}


def baseline_entry(found: list[figures.Change] | None,
                   ranks: list[figures.Rank] = ()) -> dict | None:
    """-baseline: every figure measured alone and together, in the ranking's order, and the
    ranking (each test's headline figure's change with its interval)."""
    if found is None:
        return None
    return {"changes": [{"proc": c.proc, "test": c.test, "figure": c.figure.name,
                         "alone": c.alone, "together": c.together, "change_pct": c.change_pct,
                         "slowdown": None if math.isinf(c.slowdown) else c.slowdown}
                        for c in found],
            "ranking": [{"proc": r.proc, "test": r.test, "figure": r.figure.name,
                         "change_pct": r.finding.pct,
                         "interval_pct": list(r.finding.pct_interval or ()) or None,
                         "statistic": r.finding.test, "p": r.finding.p, "noise": r.noise or None}
                        for r in ranks]}


def startup_entry(began, t0: int) -> dict[str, int] | None:
    """When the command started and how long it took to the start barrier's release."""
    if began is None or not t0:
        return None
    return {"began_ns": began.ns, "resolution_ns": began.resolution_ns,
            "to_release_ns": t0 - began.ns}


def document(plan: Plan, records: tuple[Record, ...], procs: tuple[Proc, ...], info: SysInfo,
             date: str, failures: tuple[str, ...] = (),
             repetitions: list[tuple[Record, ...]] = (),
             alone: list[dict[str, float | None]] | None = None,
             found: list[figures.Change] | None = None, began=None,
             alone_info: list[list[str]] | None = None, interrupted: int = 0,
             cut_short: tuple[str, ...] = (), stopped_alone: int | None = None,
             ranks: list[figures.Rank] = ()) -> dict[str, Any]:
    """The whole run as one JSON-ready dict (see schema/results.schema.json): `records` are the
    first (or only) repetition; `repetitions` all of them (-repeat); `alone` each test's main
    figures alone, `alone_info` its info in each run alone (the kernel variants its set-up
    chose), `found` the changes and `ranks` their ranking (-baseline); `began` (a startup.Began) when the command
    started; `interrupted` the signal that stopped the run, `cut_short` the tests a stop (a
    signal, a failure) ended before their measured end; `stopped_alone` the plan's index of the
    group whose run alone (-baseline) a stop ended before anything ran together, whose figures
    these are (its plan.groups entry is then index 0, as it ran)."""
    run = run_entries(plan, records, procs)
    for test, figs in zip(run["tests"], alone or [None] * len(procs)):
        test["alone"] = figs
    for test, infos in zip(run["tests"], alone_info or ()):
        test["alone_info"] = infos
    return plain({
        "schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "version": __version__,
        "command": plan.command, "date": date, "config": plan.config,
        "plan": {"settings": asdict(plan.settings),
                 "groups": [group_entry(g, records, procs) for g in plan.groups]},
        "system": asdict(info), "histograms": HISTOGRAMS, **run,
        "repeats": repeats_entry(plan, list(repetitions), procs),
        "baseline": baseline_entry(found, ranks),
        "startup": startup_entry(began, run["time_zero_ns"]),
        "failures": failures, "cut_short": cut_short,
        "interrupted": signal.Signals(interrupted).name if interrupted else None,
        "stopped_alone": stopped_alone})


def json_text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Column:
    """A CSV column: a scalar's path in a test entry, and its unit as the text report gives it
    (the schema's x-unit, or x-csv-unit where the report shows another: latency in us)."""
    path: tuple[str, ...]
    unit: str = ""
    scale: float = 1.0            # JSON value x scale = the column's value
    title: str = ""               # its name's stem, when not its path

    @property
    def name(self) -> str:
        return (self.title or ".".join(self.path)) + (f" ({self.unit})" if self.unit else "")


CSV_SCALES = {("ns", "us"): 1e-3, ("ns", "ms"): 1e-6}


def scalar_columns(node: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[Column]:
    """The scalar properties of a schema object, nested objects flattened, arrays left out
    (histograms, samples: the JSON holds them)."""
    defs = schema()["$defs"]
    columns = []
    for name, sub in node["properties"].items():
        sub = defs[sub["$ref"].rsplit("/", 1)[1]] if "$ref" in sub else sub
        types = sub.get("type", ())
        if "properties" in sub:
            columns += scalar_columns(sub, (*prefix, name))
        elif "array" not in types:
            unit = sub.get("x-unit", "")
            shown = sub.get("x-csv-unit", unit)
            columns.append(Column((*prefix, name), shown, CSV_SCALES.get((unit, shown), 1.0)))
    return columns


def csv_columns() -> list[Column]:
    """-csvAll's columns: every scalar of a test entry."""
    return scalar_columns(schema()["$defs"]["test"])


# The default CSV's columns, in the report's order: (a path prefix in a test entry, the prefix
# whose values some test must have for them to be shown (None: always), the title's stem when
# not the path). table.proc and table.test repeat proc and kind; figures, beside alone, are
# -baseline's together.
REPORT_COLUMNS: tuple[tuple[str, str | None, str], ...] = (
    ("host", "host", ""), ("rank", "rank", ""), ("proc", None, ""), ("group", None, ""),
    ("index", None, ""), ("action", None, ""), ("kind", None, ""), ("state", None, ""),
    ("table", None, ""), ("sys_bw", None, ""), ("latency", None, ""), ("cpu", None, ""),
    ("spin", "spin", ""), ("streams", "streams", ""),
    ("check", None, ""), ("alone", "alone", ""), ("figures", "alone", "together"))
REPEATED = {("table", "proc"), ("table", "test")}


def under(column: Column, prefix: str) -> bool:
    """The column's path is the dotted prefix or lies below it."""
    return (".".join(column.path) + ".").startswith(prefix + ".")


def report_columns(rows: list[dict[str, Any]]) -> list[Column]:
    """The default CSV's columns (REPORT_COLUMNS) for these test entries."""
    every = [c for c in csv_columns() if c.path not in REPEATED]
    columns = []
    for prefix, when, title in REPORT_COLUMNS:
        if when and not any(row.get(when) is not None for row in rows):
            continue
        columns += [Column(c.path, c.unit, c.scale,
                           ".".join((title, *c.path[1:])) if title else "")
                    for c in every if under(c, prefix)]
    return columns


def lookup(entry: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        entry = entry.get(key) if isinstance(entry, dict) else None
    return entry


def csv_value(value: Any, column: Column) -> Any:
    """A value as its column shows it: scaled to the column's unit, text on one line."""
    if value is None:
        return ""
    if isinstance(value, str):
        return " | ".join(value.splitlines())
    if column.scale != 1.0 and not isinstance(value, bool):
        return round(value * column.scale, 3)
    return value


def csv_text(doc: dict[str, Any], everything: bool = False) -> str:
    """One row per test process of each complete repetition (-repeat; the one run's
    otherwise), numbered in the first column: the report's figures (everything: every scalar
    of the test entry), named by their JSON path and unit (the same units as the text
    report)."""
    later = [run["tests"] for run in (doc["repeats"] or {}).get("runs", ())[1:]]
    rows = [(k, {**test, "alone": top.get("alone"), "alone_info": top.get("alone_info")})
            for k, tests in enumerate([doc["tests"], *later], 1)  # (runs[0]: the top level's)
            for test, top in zip(tests, doc["tests"])]            # -baseline: each one's alone
    columns = csv_columns() if everything else report_columns([test for _, test in rows])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["repetition", *(c.name for c in columns)])
    for k, test in rows:
        writer.writerow([k, *(csv_value(lookup(test, c.path), c) for c in columns)])
    return out.getvalue()


JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
              "integer": int, "number": (int, float)}


def misfit(value: Any, rule: dict[str, Any], root: dict[str, Any], where: str) -> str:
    """Where `value` does not have the shape the schema's `rule` gives ('' when it does): the
    types, required properties, items (their count: minItems, prefixItems without more) and
    least values, the parts of JSON Schema the results schema uses to say what compare and plot
    read."""
    while "$ref" in rule:
        rule = root["$defs"][rule["$ref"].rsplit("/", 1)[1]]
    kinds = rule.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        allowed = tuple(JSON_TYPES[k] for k in kinds)
        if not isinstance(value, allowed) or (isinstance(value, bool) and "boolean" not in kinds):
            return f"{where or 'the document'} is not {' or '.join(kinds)}"
    if isinstance(value, dict):
        missing = [k for k in rule.get("required", ()) if k not in value]
        if missing:
            return f"{where or 'the document'} has no {missing[0]!r}"
        for k, sub in rule.get("properties", {}).items():
            if k in value and (why := misfit(value[k], sub, root, f"{where}.{k}".lstrip("."))):
                return why
    if isinstance(value, (int, float)) and not isinstance(value, bool) and \
            value < rule.get("minimum", value):
        return f"{where} is {value}, below its least, {rule['minimum']}"
    if isinstance(value, list):
        rules = [*rule.get("prefixItems", ())]
        if len(value) < rule.get("minItems", 0) or \
                (rule.get("items") is False and len(value) > len(rules)):
            return f"{where} has {len(value)} items, not {len(rules) or rule['minItems']}"
        for i, item in enumerate(value):
            sub = rules[i] if i < len(rules) else rule.get("items")
            if sub and (why := misfit(item, sub, root, f"{where}[{i}]")):
                return why
    return ""


def inconsistent(doc: dict[str, Any]) -> str:
    """What the schema cannot say is wrong ('' when nothing): a test whose group is not one of
    the plan's (compare and plot look its group up), a repetition of another number of
    tests."""
    groups = len(doc["plan"]["groups"])
    runs = (doc.get("repeats") or {}).get("runs", [])
    if doc.get("repeats") and doc["repeats"]["count"] != len(runs):
        return f"repeats.count is {doc['repeats']['count']}, but repeats.runs holds {len(runs)}"
    for i, run in enumerate(runs):
        if len(run["tests"]) != len(doc["tests"]):
            return (f"repeats.runs[{i}] has {len(run['tests'])} tests, the top-level tests "
                    f"{len(doc['tests'])}")
    lists = [("tests", doc["tests"]),
             *((f"repeats.runs[{i}].tests", run["tests"]) for i, run in enumerate(runs))]
    for where, tests in lists:
        for i, test in enumerate(tests):
            if not 0 <= test["group"] < groups:
                return (f"{where}[{i}].group is {test['group']}, but the plan's groups are "
                        f"numbered 0 to {groups - 1}")
    return ""


class NotANumber(ValueError):
    """NaN or Infinity (or 1e400, read as one): Python's json reads them, JSON has no such
    number, -json writes none."""


def not_json(word: str):
    raise NotANumber(word)


def finite(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else not_json(text)


def load(path: str) -> dict[str, Any]:
    """A results file written by -json, checked for its schema name, version and shape (read
    at most inputs.RESULTS_LIMIT bytes, from a regular file only)."""
    try:
        doc = json.loads(read_bounded(path, RESULTS_LIMIT), parse_constant=not_json,
                         parse_float=finite)
    except NotANumber as e:
        raise ResultsFileError(f"{path} is not JSON: it holds {e}, which is no JSON "
                               f"number") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsFileError(f"{path} is not JSON: {e}") from None
    except RecursionError:                    # arrays nested deeper than any results file
        raise ResultsFileError(f"{path} is not a torque-async results file: nested too "
                               f"deeply") from None
    except ValueError as e:                   # read_bounded: one line naming the file; an
        said = str(e)                         # integer of more digits than int() converts
        raise ResultsFileError(said if path in said else f"{path} is not a torque-async "
                               f"results file: {said.split(';')[0]}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_NAME:
        raise ResultsFileError(f"{path} is not a torque-async results file (-json)")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ResultsFileError(f"{path} has results schema version "
                               f"{doc.get('schema_version')!r}; "
                               f"this torque-async reads version {SCHEMA_VERSION}")
    rules = schema()
    why = misfit(doc, rules, rules, "") or inconsistent(doc)
    if why:
        raise ResultsFileError(f"{path} is not a torque-async results file: {why}")
    return doc
