"""torque-async compare BASE.json RUN.json [RUN.json ...]: what changed, and whether it is noise.

Tests are matched by what they are: the action, its arguments and the local options that change
the work (`identity`), then by their order among tests alike, then by process index (and rank,
under mpiexec); a plan reordered still matches test for test. Each matched test is compared on
the figures its family reports (`figures`): bandwidth and IO/s, latency p50/p99, spinWait
loops/s, -cyclic p99 and max, a stream's late and dropped frames and lateness p99 per
sub-stream. The total is summed over
the matched tests only; unmatched tests are listed apart, never summed.

With repetitions on both sides (-repeat), a change is significant when a two-sample t-test
(Welch's, 95%) says the means differ, as pyperf's compare_to does, and in the direction of the
medians' change (the change shown is the medians'); with one value on either side
a change cannot be told from noise, and the report says so. A test that failed, or that a stop
(a signal, another test's failure) cut short, is compared on what it measured but marked, and
never counted as a regression; the report names each run's failures and interruption first.
"""
from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Any

from .figures import Spread
from .options import SETTINGS
from .stats import Stats, bucket, merge


# Local options that say how a test runs, not what work it does: runs that differ only in them
# are the same test (a run with -affinityNumber against one without is a question to answer).
HOW = SETTINGS                                 # (Option.how in the option table)
US = 1000                                      # ns per us
QUANTILES = {"latency p50": 0.5, "latency p99": 0.99, "lateness p99": 0.99, "lateness max": 1}

# Two-sided 95% critical values of Student's t by degrees of freedom (then 40, 60, 120, inf).
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
T95_TAIL = ((120, 1.980), (60, 2.000), (40, 2.021))


def t_critical(df: float) -> float:
    """The 95% two-sided critical t for df degrees of freedom, rounded down to a tabulated df
    (conservative)."""
    d = max(1, int(df))
    if d <= len(T95):
        return T95[d - 1]
    return next((t for limit, t in T95_TAIL if d >= limit), T95[-1])


def significant(a: list[float], b: list[float]) -> bool | None:
    """Welch's t-test at 95%: do the means of a and b differ? None: it cannot be told (fewer
    than two values on a side)."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return ma != mb
    t = abs(ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return t > t_critical(df)


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
        out[f"{name} lateness p99"] = ("us", False, _us(sub.get("p99")))
    return out


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / US


def stream_subs(test: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, figures) of each sub-stream of a stream test, as its report gives them: late and
    dropped frames, lateness p99 (ns)."""
    streams = test.get("streams") or {}
    return [(f"sub {key[3:]}", {"late": sub["late"], "dropped": sub["dropped"],
                                "p99": sub["lateness_p99"]})
            for key, sub in sorted(streams.items()) if key.startswith("sub") and sub]


def repetitions(doc: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The tests of every repetition of a run (one list for a run without -repeat)."""
    return [run["tests"] for run in (doc.get("repeats") or {}).get("runs", ())] or [doc["tests"]]


def identity(doc: dict[str, Any], group: int) -> str:
    """What a group's tests are: action, arguments and the locals that change the work."""
    g = doc["plan"]["groups"][group]
    work = {k: v for k, v in sorted(g["locals"].items()) if k not in HOW}
    return json.dumps([g["action"], g["args"], work])


def keys(doc: dict[str, Any]) -> dict[int, tuple[str, int]]:
    """group index -> (identity, its order among the groups alike)."""
    seen: dict[str, int] = {}
    out = {}
    for g in range(len(doc["plan"]["groups"])):
        ident = identity(doc, g)
        out[g] = (ident, seen.get(ident, 0))
        seen[ident] = out[g][1] + 1
    return out


def test_name(doc: dict[str, Any], test: dict[str, Any]) -> str:
    return group_name(doc, test, f"process {test['index']}")


def group_name(doc: dict[str, Any], test: dict[str, Any], which: str) -> str:
    """A test's group as the report names it, `which` of its processes (and the rank)."""
    g = doc["plan"]["groups"][test["group"]]
    rank = "" if test.get("rank") is None else f", rank {test['rank']} on {test.get('host')}"
    return f"{g['text']} [{which}{rank}]"


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
            values = [f[name][2] for f in each]
            out[name] = (unit, up, None if None in values else sum(values))
    return out


def latency(test: dict[str, Any]) -> Stats:
    """A test's latency (or lateness) Stats from its record ([lowest, highest ns, count])."""
    r = test["record"]
    return Stats(r["lat_count"], r["lat_min"], r["lat_max"], r["lat_sum"],
                 tuple((bucket(lo), n) for lo, _, n in r["hist"]))


@dataclass(frozen=True)
class Change:
    test: str
    figure: str
    unit: str
    higher_is_better: bool
    a: tuple[float, ...]
    b: tuple[float, ...]
    unresolved: tuple[str, ...] = ()   # flags (short, harness) of either side's repetitions
    unfinished: tuple[str, ...] = ()   # "failed in B", "cut short in A" (unfinished())

    @property
    def pct(self) -> float | None:
        ma, mb = statistics.median(self.a), statistics.median(self.b)
        return None if not ma else 100 * (mb - ma) / abs(ma)

    @property
    def significant(self) -> bool | None:
        """Welch's test says the means differ, and they moved the way the medians did (the
        change shown): B's median above A's with its mean below is no significant rise."""
        sig = significant(list(self.a), list(self.b))
        return sig and not self.crossed if sig is not None else None

    @property
    def crossed(self) -> bool:
        """The means moved the other way from the medians, or the medians did not move."""
        medians = statistics.median(self.b) - statistics.median(self.a)
        return medians * (statistics.fmean(self.b) - statistics.fmean(self.a)) <= 0

    def worse(self, threshold: float) -> bool:
        """B is worse than A by more than threshold percent (a regression, significant or not);
        from 0 (late frames) any change is beyond every threshold."""
        return self.gain(threshold) < 0

    def better(self, threshold: float) -> bool:
        return self.gain(threshold) > 0

    def gain(self, threshold: float) -> int:
        """1 better, -1 worse beyond the threshold, 0 neither."""
        pct = self.pct
        if pct is None:
            pct = statistics.median(self.b) * math.inf if statistics.median(self.b) else 0.0
        up = pct if self.higher_is_better else -pct
        return 1 if up > threshold else -1 if -up > threshold else 0

    def regression(self, threshold: float) -> bool:
        """A significant change for the worse beyond the threshold, of figures both runs
        resolved."""
        return bool(self.significant) and self.worse(threshold) and not self.unresolved \
            and not self.unfinished

    def verdict(self, threshold: float) -> str:
        pct, gain = self.pct, self.gain(threshold)
        flags = f"; not resolved ({', '.join(self.unresolved)})" if self.unresolved else ""
        flags += f"; did not finish ({', '.join(self.unfinished)})" if self.unfinished else ""
        if pct is None and not gain:
            return "no change (0 on both sides)" + flags
        direction = ("within threshold", "better", "worse")[gain]
        change = f"{pct:+.1f}%" if pct is not None else "from 0"
        sig = self.significant
        if sig is None:
            return f"{change} {direction}, cannot be told from noise (one run: use -repeat)" \
                + flags
        still = statistics.median(self.b) == statistics.median(self.a)
        crossed = ", not significant" + ((" (the medians did not move)" if still else
                                          " (the means moved the other way)")
                                         if significant(list(self.a), list(self.b)) else "")
        return f"{change} {direction}" + ("" if sig else crossed) + flags


@dataclass(frozen=True)
class Comparison:
    changes: tuple[Change, ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    unmeasured: tuple[str, ...] = ()   # matched, but with no figure on a side: it did not finish


def group_of(keys: dict[int, tuple[str, int]], test: dict[str, Any]) -> tuple:
    """A test's group as its side's keys() name it, and its rank."""
    return keys[test["group"]], test.get("rank")


def compare(a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    """Every figure of every matched test, then the total bandwidth of the matched tests. A
    group whose process count differs (-p) is compared whole (group_figures): its process i
    alone does another share of the work on each side."""
    ka, kb = keys(a), keys(b)
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
        name = test_name(a, first) if len(ia) == len(jb) else \
            group_name(a, first, f"{len(ia)} processes in A, {len(jb)} in B")
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
                changes.append(Change(name, fig, unit, up, va, vb, flags, ended))
        if len(changes) == before and ended:       # (a test that died before it published)
            unmeasured.append(f"{name}: did not finish ({', '.join(ended)})")
    total = lambda reps, idx: tuple(sum(rep[k]["sys_bw"] for k in idx) for rep in reps)  # noqa
    if matched or groups:
        pairs = matched + groups
        changes.append(Change("Total (matched tests)", "system BW", "MB/s", True,
                              total(reps_a, [i for ia, _ in pairs for i in ia]),
                              total(reps_b, [j for _, jb in pairs for j in jb]),
                              tuple(sorted({f for c in changes for f in c.unresolved})),
                              tuple(sorted(ended_any))))
    return Comparison(tuple(changes), tuple(only_a), tuple(only_b), tuple(unmeasured))


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
                      "rank, so a cluster run's tests match none of a one-host run's"))
    if a.get("version") != b.get("version"):
        out.append(f"note: different torque-async versions: {a.get('version')} and "
                   f"{b.get('version')}")
    if plan_of(a) != plan_of(b):
        out.append(f"note: the plans differ (A: {plan_text(a)}; B: {plan_text(b)}): a test's "
                   f"neighbours are not the same, so a change may be the plan's, not the "
                   f"system's")
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
    """The median, and with several values their spread as the -repeat block gives it:
    (max - min) / median."""
    got = Spread.of(list(values))
    if len(values) < 2 or got.spread_pct is None:
        return f"{got.median:.1f}"
    return f"{got.median:.1f} (spread {got.spread_pct:.1f}%)"


def lines(found: Comparison, docs: tuple[dict[str, Any], dict[str, Any]],
          names: tuple[str, str], threshold: float) -> list[str]:
    """The report of `found` = compare(*docs) between the runs read from `names`."""
    out = [f"{label}: {path} ({doc['date']}, {len(repetitions(doc))} repetition"
           f"{'s' if len(repetitions(doc)) > 1 else ''}): torque-async {doc['command']}".rstrip()
           for label, path, doc in zip("AB", names, docs)]
    out += provenance(*docs) + incomplete(docs[0], "A") + incomplete(docs[1], "B")
    out += ["", "test, figure, A, B, unit, change"]
    out += [", ".join((c.test, c.figure, value_text(c.a), value_text(c.b), c.unit,
                       c.verdict(threshold))) for c in found.changes]
    out += [f"only in A (not compared): {t}" for t in found.only_a]
    out += [f"only in B (not compared): {t}" for t in found.only_b]
    out += [f"no figures to compare: {t}" for t in found.unmeasured]
    if not found.changes:
        return out + ["", "nothing compared: no test of A matches one of B (tests match by "
                          "action, arguments and the local options that change the work)"]
    sig = [c for c in found.changes if c.significant]
    sure = [c for c in sig if not (c.unresolved or c.unfinished)]    # (the others: below)
    worse = sum(c.worse(threshold) for c in sure)
    better = sum(c.better(threshold) for c in sure)
    told = sum(c.significant is not None for c in found.changes)
    summary = (f"significant changes beyond {threshold:g}%: {worse} worse, {better} better; "
               f"{told - len(sig)} not significant" if told else
               "no figure has repetitions on both sides: no change can be told from noise "
               "(run both with -repeat N)")
    unresolved = sum(bool(c.unresolved) for c in found.changes)
    if unresolved:
        summary += (f"; {unresolved} figure{'s' * (unresolved > 1)} not resolved on one side or "
                    f"both (measured too briefly, or the harness's cost too large a share: "
                    f"lengthen the tests, e.g. -t), never counted as worse or better")
    ended = sum(bool(c.unfinished) for c in found.changes)
    if ended:
        summary += (f"; {ended} figure{'s' * (ended > 1)} of tests that did not finish (failed, "
                    f"or cut short by a stop), never counted as worse or better")
    return out + ["", summary]
