"""torque-async compare BASE.json RUN.json [RUN.json ...]: what changed, and whether it is noise.

Tests are matched by what they are: the action, its arguments and the local options that change
the work (`identity`), then by their order among tests alike, then by process index (and rank,
under mpiexec); a plan reordered still matches test for test. Each matched test is compared on
the figures its family reports (`figures`): bandwidth and IO/s, latency p50/p99, spinWait
loops/s, -cyclic p99 and max, a stream's late and dropped frames and lateness p99 per
sub-stream, and a wired stage's (-from) lapped frames and what it inherited (late, lost, max).
The total is summed over
the matched tests only; unmatched tests are listed apart, never summed.

With repetitions on both sides (-repeat), each figure's two samples are compared by a stated
test (significance.py): Welch's t of the means for rates (BW, IO/s, loops/s), Mann-Whitney U of
the medians for percentiles and frame counts; each change is shown with its 95% interval and p,
and the figures of one compare are one family, decided together by Holm's correction (the
family-wise error rate stays at 5%). One measurement is one finding: a test's IO/s is decided
with its BW (the same transfers over the same time), and the Total, a sum of the tests, is no
test of its own. With one value on either side a change cannot be told from noise; with no
spread on either side it is untestable; the report says so. A test that failed, or that a stop
(a signal, another test's failure) cut short, is compared on what it measured but marked, and
never counted as a regression; the report names each run's failures and interruption first.

`match`: "identity" (above), or "position": tests matched by group and process index, whatever
they are (a sweep of transfer size or plan shape). A one-host run's tests match rank 0's of a
cluster run (a plain run and an `mpiexec -n 1` run of one plan are the same tests).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property, partial
from typing import Any

from .significance import (ALPHA, MANN_WHITNEY, ONE_RUN, SAME, UNTESTABLE, WELCH, Finding,
                           Spread, holm, sample_test)
from .options import RUN_SETTINGS, SETTINGS
from .stats import Stats, bucket, merge


# Local options that say how a test runs, not what work it does: runs that differ only in them
# are the same test (a run with -affinityNumber against one without is a question to answer).
HOW = SETTINGS                                 # (Option.how in the option table)
US = 1000                                      # ns per us
QUANTILES = {"latency p50": 0.5, "latency p99": 0.99, "lateness p99": 0.99, "lateness max": 1}

RATES = frozenset({"BW", "IO/s", "loops/s", "system BW"})   # Welch's t; the others: ranks
FINDING, FOLLOWS, TOTAL = "finding", "follows", "total"    # a Change's role in its family
MATCHES = ("identity", "position")
RANK_TAG = re.compile(r"\.[^./]+\.r\d+$")               # cluster.own()'s .HOST.rRANK of a dir


def figures(test: dict[str, Any]) -> dict[str, tuple[str, bool, float | None]]:
    """name -> (unit, higher is better, value) of the figures a test's family reports."""
    family, table, lat = test["family"], test["table"] or {}, test.get("latency") or {}
    exact = test.get("figures") or {}          # unrounded, as the -repeat block's
    out: dict[str, tuple[str, bool, float | None]] = {}
    if family == "cpu":                        # (one with no rate alone has no spin block)
        loops = exact.get("loops_per_s", (test.get("spin") or {}).get("loops_per_s"))
        out["loops/s"] = ("Mloops/s", True, None if loops is None else loops / 1e6)
    elif family == "timer":
        out["lateness p99"] = ("us", False, _us(lat.get("p99")))
        out["lateness max"] = ("us", False, _us(lat.get("max")))
    else:
        out["BW"] = ("MB/s", True, exact.get("bw", table.get("bw")))
        out["IO/s"] = ("IO/s", True, exact.get("iops", table.get("iops")))
        out["latency p50"] = ("us", False, _us(lat.get("p50")))
        out["latency p99"] = ("us", False, _us(lat.get("p99")))
    for name, sub in stream_subs(test):
        out[f"{name} late"] = ("frames", False, sub["late"])
        out[f"{name} dropped"] = ("frames", False, sub["dropped"])
        out[f"{name} lateness p99"] = ("us", False, _us(sub["lateness_p99"]))
        if sub.get("from_group") is not None:       # a wired stage: what it inherited apart
            out[f"{name} lapped"] = ("frames", False, sub.get("lapped"))
            out[f"{name} inherited late"] = ("frames", False, sub.get("up_late"))
            out[f"{name} inherited lost"] = ("frames", False, sub.get("up_lost"))
            out[f"{name} inherited max"] = ("us", False, _us(sub.get("up_max")))
    return out


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / US


def stream_subs(test: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, JSON figures) of each sub-stream of a stream test, as its report names them."""
    streams = test.get("streams") or {}
    return [(f"sub {key[3:]}", sub) for key, sub in sorted(streams.items())
            if key.startswith("sub") and sub]


def repetitions(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The tests of every repetition of a run (one list for a run without -repeat)."""
    return [run["tests"] for run in (doc.get("repeats") or {}).get("runs", ())] or [doc["tests"]]


def work(doc: dict[str, Any], group: int) -> dict[str, Any]:
    """A group's locals that change the work; a cluster run's -dir without the rank's tag
    (.HOST.rRANK: a name, not another place)."""
    g = doc["plan"]["groups"][group]
    out = {k: v for k, v in sorted(g["locals"].items()) if k not in HOW}
    if doc.get("cluster") and isinstance(out.get("dir"), str):
        out["dir"] = RANK_TAG.sub("", out["dir"])
    return out


def identity(doc: dict[str, Any], group: int) -> str:
    """What a group's tests are: action, arguments and the locals that change the work."""
    g = doc["plan"]["groups"][group]
    return json.dumps([g["action"], g["args"], work(doc, group)])


def keys(doc: dict[str, Any], match: str = "identity") -> dict[int, tuple[str, int]]:
    """group index -> (identity, its order among the groups alike); matched by position:
    (the group's index, 0)."""
    seen: dict[str, int] = {}
    out = {}
    for g in range(len(doc["plan"]["groups"])):
        ident = identity(doc, g) if match == "identity" else f"group {g}"
        out[g] = (ident, seen.get(ident, 0))
        seen[ident] = out[g][1] + 1
    return out


def test_name(doc: dict[str, Any], test: dict[str, Any]) -> str:
    return group_name(doc, test, f"process {test['index']}")


def group_name(doc: dict[str, Any], test: dict[str, Any], which: str,
               other: dict[str, Any] | None = None, its: dict[str, Any] | None = None) -> str:
    """A test's group as the report names it, `which` of its processes (and the rank); with
    the test `its` of the `other` run it matched, both texts when they differ ('A | B')."""
    text = doc["plan"]["groups"][test["group"]]["text"]
    if other is not None and (there := other["plan"]["groups"][its["group"]]["text"]) != text:
        text = f"{text} | {there}"
    rank = "" if test.get("rank") is None else f", rank {test['rank']} on {test.get('host')}"
    return f"{text} [{which}{rank}]"


def group_figures(tests: list[dict[str, Any]]) -> dict[str, tuple[str, bool, float | None]]:
    """figures() of one test, or of several processes as one: rates and frame counts summed,
    latency and lateness from their histograms merged (as the report's group line)."""
    if len(tests) == 1:
        return figures(tests[0])
    each = [figures(t) for t in tests]
    merged = merge(latency(t) for t in tests)
    out = {}
    for name, (unit, up, _) in each[0].items():
        if name in QUANTILES:
            q = QUANTILES[name]
            value = (merged.hi if q == 1 else merged.percentile(q)) if merged.count else None
            out[name] = (unit, up, _us(value))
        elif not name.endswith("lateness p99"):   # a sub-stream's: no histogram of its own here
            values = [f[name][2] for f in each]   # (counts summed, a most its greatest)
            combine = max if name.endswith(" max") else sum
            out[name] = (unit, up, None if None in values else combine(values))
    return out


def latency(test: dict[str, Any]) -> Stats:
    """A test's latency (or lateness) Stats from its record ([lowest, highest ns, count])."""
    r = test["record"]
    return Stats(r["lat_count"], r["lat_min"], r["lat_max"], r["lat_sum"],
                 tuple((bucket(lo), n) for lo, _, n in r["hist"]))


@dataclass(frozen=True)
class Change:
    """One figure of one matched test, its value in each repetition of A and of B. `role`:
    FINDING, one of its compare's family; FOLLOWS, the same measurement as its test's BW
    (IO/s), decided with it; TOTAL, a sum of the tests, no test of its own. `decided`: its
    family's decision (compare()); None: tested alone (p < ALPHA)."""
    test: str
    figure: str
    unit: str
    higher_is_better: bool
    a: tuple[float, ...]
    b: tuple[float, ...]
    unresolved: tuple[str, ...] = ()   # flags (short, harness) of either side's repetitions
    unfinished: tuple[str, ...] = ()   # "failed in B", "cut short in A" (unfinished())
    role: str = FINDING
    decided: bool | None = None

    @cached_property
    def finding(self) -> Finding:
        """The samples compared (Welch's t for rates, Mann-Whitney U for the others)."""
        got = sample_test(self.a, self.b, ranks=self.figure not in RATES)
        if self.decided is None or got.test is None:
            return got
        return replace(got, significant=self.decided and self.role != TOTAL)

    @property
    def pct(self) -> float | None:
        return self.finding.pct

    @property
    def significant(self) -> bool | None:
        """The change is not noise (its family's decision); None: no test applies (one run, or
        no spread on either side)."""
        return None if self.finding.test is None else self.finding.significant

    def worse(self, threshold: float) -> bool:
        """B is worse than A by more than threshold percent (a regression, significant or not);
        from 0 (late frames) any change is beyond every threshold."""
        return self.gain(threshold) < 0

    def better(self, threshold: float) -> bool:
        return self.gain(threshold) > 0

    def gain(self, threshold: float) -> int:
        """1 better, -1 worse beyond the threshold, 0 neither."""
        pct, f = self.pct, self.finding
        if pct is None:
            return f.direction(self.higher_is_better)
        up = pct if self.higher_is_better else -pct
        return 1 if up > threshold else -1 if -up > threshold else 0

    @property
    def counted(self) -> bool:
        """A significant finding of figures both runs resolved and finished: what the summary
        counts worse or better."""
        return self.role == FINDING and bool(self.significant) and not self.unresolved \
            and not self.unfinished

    def regression(self, threshold: float) -> bool:
        """A significant change for the worse beyond the threshold, of figures both runs
        resolved."""
        return self.counted and self.worse(threshold)

    def verdict(self, threshold: float) -> str:
        """The change, what it is, and its test: '-30.0% worse (95% CI -31.2% to -28.8%;
        Welch's t, p = 1.2e-08)'."""
        f, gain = self.finding, self.gain(threshold)
        flags = f"; not resolved ({', '.join(self.unresolved)})" if self.unresolved else ""
        flags += f"; did not finish ({', '.join(self.unfinished)})" if self.unfinished else ""
        change = change_text(f.pct, f.change, self.unit)
        if not any(self.a) and not any(self.b):
            return "no change (0 on both sides)" + flags
        if f.why == SAME:
            return "no change (every repetition alike on both sides)" + flags
        direction = ("within threshold", "better", "worse")[gain]
        if f.why == ONE_RUN:
            return f"{change} {direction}, cannot be told from noise (one run: use -repeat)" \
                + flags
        if f.why == UNTESTABLE:
            return f"{change}, untestable (every repetition alike on each side: no spread to " \
                   f"tell noise by)" + flags
        stated = f"{f.interval_text(self.unit)}; {f.test}, p = {f.p:.2g}"
        if self.role == TOTAL:
            return f"{change} ({stated}), the sum of the tests above: not a test" + flags
        said = direction if f.significant else "not significant"
        stated += "; decided with its BW: one measurement" if self.role == FOLLOWS else ""
        return f"{change} {said} ({stated})" + flags


def change_text(pct: float | None, change: float, unit: str) -> str:
    """'+12.3%', or from 0 the change in the figure's unit ('+3 frames')."""
    return f"{pct:+.1f}%" if pct is not None else \
        ("no change" if not change else f"from 0 ({change:+g} {unit})")


@dataclass(frozen=True)
class Comparison:
    changes: tuple[Change, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    unmeasured: tuple[str, ...] = ()   # matched, but with no figure on a side: it did not finish

    @property
    def family(self) -> int:
        """How many findings Holm's correction weighed (those with a test)."""
        return sum(c.role == FINDING and c.significant is not None for c in self.changes)


def group_of(keys: dict[int, tuple[str, int]], test: dict[str, Any]) -> tuple:
    """A test's group as its side's keys() name it, and its rank (a one-host run's: 0)."""
    return keys[test["group"]], test.get("rank") or 0


def compare(a: dict[str, Any], b: dict[str, Any], match: str = "identity") -> Comparison:
    """Every figure of every matched test, then the total bandwidth of the matched tests, the
    findings decided together (decided()). A group whose process count differs (-p) is
    compared whole (group_figures): its process i alone does another share of the work on each
    side. `match`: see the module's text."""
    ka, kb = keys(a, match), keys(b, match)
    reps_a, reps_b = repetitions(a), repetitions(b)
    in_a, in_b = partial(group_of, ka), partial(group_of, kb)
    count_a, count_b = Counter(map(in_a, reps_a[0])), Counter(map(in_b, reps_b[0]))
    whole = [g for g in count_a if g in count_b and count_a[g] != count_b[g]]
    index_b = {(*in_b(t), t["index"]): i for i, t in enumerate(reps_b[0]) if in_b(t) not in whole}
    matched, only_a = [], []
    for i, t in enumerate(reps_a[0]):
        if in_a(t) in whole:
            continue
        j = index_b.pop((*in_a(t), t["index"]), None)
        if j is None:
            only_a.append(test_name(a, t))
        else:
            matched.append(([i], [j]))
    only_b = [test_name(b, reps_b[0][j]) for j in index_b.values()]
    groups = [([i for i, t in enumerate(reps_a[0]) if in_a(t) == g],
               [j for j, t in enumerate(reps_b[0]) if in_b(t) == g]) for g in whole]
    changes, unmeasured, ended_any = [], [], set()
    for ia, jb in matched + groups:
        first = reps_a[0][ia[0]]
        which = f"process {first['index']}" if len(ia) == len(jb) else \
            f"{len(ia)} process{'es' * (len(ia) != 1)} in A, {len(jb)} in B"
        name = group_name(a, first, which, *((b, reps_b[0][jb[0]]) if match == "position"
                                              else ()))
        ta, tb = [[rep[i] for i in ia] for rep in reps_a], [[rep[j] for j in jb] for rep in reps_b]
        fa, fb = [group_figures(t) for t in ta], [group_figures(t) for t in tb]
        flags = tuple(sorted({f for t in ta + tb for x in t for f in x.get("flags") or ()}))
        ended = tuple(sorted({f"{how} in {side}" for side, reps in (("A", ta), ("B", tb))
                              for t in reps for x in t if (how := unfinished(x))}))
        ended_any.update(ended)
        before = len(changes)
        for fig, (unit, up, _) in fa[0].items():
            va = tuple(f[fig][2] for f in fa if f.get(fig) and f[fig][2] is not None)
            vb = tuple(f[fig][2] for f in fb if f.get(fig) and f[fig][2] is not None)
            if va and vb:
                role = FOLLOWS if fig == "IO/s" and "BW" in fa[0] else FINDING
                changes.append(Change(name, fig, unit, up, va, vb, flags, ended, role))
        if len(changes) == before and ended:       # (a test that died before it published)
            unmeasured.append(f"{name}: did not finish ({', '.join(ended)})")
    total = lambda reps, idx: tuple(sum(rep[k]["sys_bw"] for k in idx) for rep in reps)  # noqa
    if matched or groups:
        pairs = matched + groups
        changes.append(Change("Total (matched tests)", "system BW", "MB/s", True,
                              total(reps_a, [i for ia, _ in pairs for i in ia]),
                              total(reps_b, [j for _, jb in pairs for j in jb]),
                              tuple(sorted({f for c in changes for f in c.unresolved})),
                              tuple(sorted(ended_any)), TOTAL))
    return Comparison(tuple(decided(changes)), tuple(only_a), tuple(only_b), tuple(unmeasured))


def decided(changes: list[Change]) -> list[Change]:
    """The changes with their family's decisions: Holm's correction over the findings (one per
    measurement); a FOLLOWS figure takes the decision of its test's BW (the one before it: a
    test's figures come in figures() order), the TOTAL none."""
    family = [k for k, c in enumerate(changes) if c.role == FINDING]
    said = dict(zip(family, holm([changes[k].finding.p for k in family], ALPHA)))
    out, bw = [], False
    for k, c in enumerate(changes):
        if c.figure == "BW" and c.role == FINDING:
            bw = said[k]
        out.append(replace(c, decided=said.get(k, bw if c.role == FOLLOWS else False)))
    return out


def unfinished(test: dict[str, Any]) -> str | None:
    """How a test's measured part did not reach its end: "failed" (its error, or it never got to
    done), "cut short" (a stop ended it before its limit), else None."""
    if test["record"].get("error") or test["state"] != "done":
        return "failed"
    return None if test["record"].get("whole", True) else "cut short"


def incomplete(doc: dict[str, Any], label: str) -> list[str]:
    """What the run `label` says went wrong: its interruption, failures and tests cut short."""
    signal = [f"interrupted by {doc['interrupted']}"] if doc.get("interrupted") else []
    return [f"note: {label} did not finish: {line}"
            for line in (*signal, *doc.get("failures", ()), *(doc.get("cut_short") or ()))]


def provenance(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Warnings when the runs came from different machines or torque-async versions."""
    out = []
    if machines(a) != machines(b):
        out.append(f"note: different machines: {', '.join(machines(a))} and "
                   f"{', '.join(machines(b))}")
    ra, rb = ranks(a), ranks(b)
    if ra != rb:
        out.append(f"note: {rank_text(ra, 'A')}, {rank_text(rb, 'B')}: tests are matched by "
                   + ("rank, so only the ranks both have are compared" if ra and rb else
                      "rank, a one-host run's tests as rank 0's"))
    if a.get("version") != b.get("version"):
        out.append(f"note: different torque-async versions: {a.get('version')} and "
                   f"{b.get('version')}")
    if plan_of(a) != plan_of(b):
        out.append(f"note: the plans differ ({plan_difference(a, b)}): a test's neighbours are "
                   f"not the same, so a change may be the plan's, not the system's")
    sa, sb = a["plan"]["settings"], b["plan"]["settings"]
    made = [f"-{k} {sa.get(k)} in A, {sb.get(k)} in B" for k in sorted(RUN_SETTINGS)
            if sa.get(k) != sb.get(k)]
    if made:
        out.append(f"note: the runs were made differently ({'; '.join(made)}): a change may be "
                   f"that choice's, not the system's")
    alone = [(label, doc["stopped_alone"]) for label, doc in (("A", a), ("B", b))
             if doc.get("stopped_alone") is not None]
    out += [f"note: {label} is a -baseline run stopped in group {k}'s run alone: its figures are "
            f"that group's alone, not measured together" for label, k in alone]
    return out


def plan_of(doc: dict[str, Any]) -> tuple:
    """What every test ran beside: each group's work (identity) and processes, in any order,
    and -slow/-fast (which keeps the tests that finished first running)."""
    groups = doc["plan"]["groups"]
    return (sorted((identity(doc, g), groups[g].get("processes")) for g in range(len(groups))),
            slow(doc))


def plan_difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    """'A: text; B: text', or where the texts are the same (defaults that differ, as a
    configuration file's), the options that differ, group by group."""
    if plan_text(a) != plan_text(b):
        return f"A: {plan_text(a)}; B: {plan_text(b)}"
    ga, gb = a["plan"]["groups"], b["plan"]["groups"]
    said = [f"group {g}: -{k} {wa.get(k)} in A, {wb.get(k)} in B"
            for g in range(len(ga)) for wa, wb in [(work(a, g), work(b, g))]
            for k in sorted(wa.keys() | wb.keys()) if wa.get(k) != wb.get(k)]
    said += [f"group {g}: {x['action']} {x['args']} in A, {y['action']} {y['args']} in B"
             for g, (x, y) in enumerate(zip(ga, gb)) if (x["action"], x["args"]) !=
             (y["action"], y["args"])]
    return "the same text, but " + ("; ".join(said) or "tests in another order")


def processes(doc: dict[str, Any]) -> int:
    """Test processes of the plan (on each rank)."""
    return sum(g.get("processes", 1) for g in doc["plan"]["groups"])


def slow(doc: dict[str, Any]) -> bool:
    """-slow as the run took it (Plan.slow): unset, the default for more than one process."""
    chosen = doc["plan"]["settings"].get("slow")
    return chosen if chosen is not None else processes(doc) > 1


def plan_text(doc: dict[str, Any]) -> str:
    return " ".join(g["text"] for g in doc["plan"]["groups"]) + \
        (" -slow" if slow(doc) else " -fast") * (processes(doc) > 1)


def ranks(doc: dict[str, Any]) -> int:
    """How many ranks ran (mpiexec); 0 for a run without a launcher."""
    return len((doc.get("cluster") or {}).get("ranks", ()))


def rank_text(n: int, label: str) -> str:
    return f"{label} is a cluster run ({n} ranks, mpiexec)" if n else f"{label} is not"


def machines(doc: dict[str, Any]) -> list[str]:
    """'host CPU model' of every host that ran (under mpiexec, each host of the cluster)."""
    systems = [h["system"] or {"hostname": h["host"]}
               for h in (doc.get("cluster") or {}).get("hosts", ())] or [doc["system"]]
    return [f"{s.get('hostname')} {s.get('cpu_model')}" for s in systems]


def value_text(values: tuple[float, ...]) -> str:
    """The median, with several values their standard deviation and CV; one value says it has
    no spread measured."""
    return Spread.of(list(values)).text()


STATED = (f"tests: {WELCH} of the means (BW, IO/s, loops/s), {MANN_WHITNEY} of the medians "
          f"(latency, lateness, frames); 95% confidence intervals; A and B: median (standard "
          f"deviation; coefficient of variation)")


def lines(found: Comparison, docs: tuple[dict[str, Any], dict[str, Any]],
          names: tuple[str, str], threshold: float) -> list[str]:
    """The report of `found` = compare(*docs) between the runs read from `names`."""
    out = [f"{label}: {path} ({doc['date']}, {len(repetitions(doc))} repetition"
           f"{'s' if len(repetitions(doc)) > 1 else ''}): torque-async {doc['command']}".rstrip()
           for label, path, doc in zip("AB", names, docs)]
    out += provenance(*docs) + incomplete(docs[0], "A") + incomplete(docs[1], "B")
    out += ["", STATED, *[f"family: Holm's correction over {found.family} finding"
                          f"{'s' * (found.family != 1)} at {ALPHA:.0%} family-wise (one per "
                          f"measurement: a test's IO/s is decided with its BW; the Total is a "
                          f"sum, not a test)"] * bool(found.family),
            "test, figure, A, B, unit, change"]
    out += [", ".join((c.test, c.figure, value_text(c.a), value_text(c.b), c.unit,
                       c.verdict(threshold))) for c in found.changes]
    out += [f"only in A (not compared): {t}" for t in found.only_a]
    out += [f"only in B (not compared): {t}" for t in found.only_b]
    out += [f"no figures to compare: {t}" for t in found.unmeasured]
    if not found.changes:
        return out + ["", "nothing compared: no test of A matches one of B (tests match by "
                          "action, arguments and the local options that change the work; "
                          "--match position matches them by group and process)"]
    findings = [c for c in found.changes if c.role == FINDING]
    sure = [c for c in findings if c.counted]                # (the others: below)
    worse = sum(c.worse(threshold) for c in sure)
    better = sum(c.better(threshold) for c in sure)
    told = sum(c.significant is not None for c in findings)
    untestable = sum(c.finding.why == UNTESTABLE for c in findings)
    summary = (f"significant changes beyond {threshold:g}% (Holm, family of {found.family}): "
               f"{worse} worse, {better} better; "
               f"{sum(c.significant is False for c in findings)} not significant" if told else
               "no figure has repetitions on both sides: no change can be told from noise "
               "(run both with -repeat N)")
    if untestable:
        summary += f"; {untestable} untestable (no spread on either side)"
    unresolved = sum(bool(c.unresolved) for c in findings)
    if unresolved:
        summary += (f"; {unresolved} figure{'s' * (unresolved > 1)} not resolved on one side or "
                    f"both (measured too briefly, or the harness's cost too large a share: "
                    f"lengthen the tests, e.g. -t), never counted as worse or better")
    ended = sum(bool(c.unfinished) for c in findings)
    if ended:
        summary += (f"; {ended} figure{'s' * (ended > 1)} of tests that did not finish (failed, "
                    f"or cut short by a stop), never counted as worse or better")
    return out + ["", summary]
