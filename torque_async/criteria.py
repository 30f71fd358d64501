"""capacity's criteria: what a point must meet, read from one run's results document (-json).

held          every stream of the plan HELD (no frame lost, past its buffer, or dropped)
p99<X, p999<X the varied group's latency per transfer (per request for -web, lateness for
              -cyclic), its processes' histograms merged; X in us, ms or s
late<F        at most a share F of the varied group's frames lost or dropped
NAME bw>F     (--keep) the group NAME (its action, or its index) keeps more than F of the
              bandwidth it had alone, measured once with the plan's globals and that group
A run that failed (a test's error, a stop) fails every criterion: its figures are not whole.
Under mpiexec the document is the whole job's (every rank's tests): held needs every stream of
every rank HELD, the percentiles and shares are the job's (every rank's histograms and frames
merged), a bandwidth is the sum over the ranks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import UsageError
from .kinds import KINDS
from .plan import Plan
from .stats import Stats, bucket, merge

NS = {"us": 1e3, "ms": 1e6, "s": 1e9}
QUANTILE = {"p99": 0.99, "p999": 0.999}
PERCENTILE = re.compile(r"(p99|p999)\s*<\s*([0-9]*\.?[0-9]+)\s*(us|ms|s)\Z")
LATE = re.compile(r"late\s*<\s*([0-9]*\.?[0-9]+)\Z")
KEEP = re.compile(r"(\S+)\s+bw\s*>\s*([0-9]*\.?[0-9]+)\Z")


@dataclass(frozen=True)
class Criterion:
    text: str                      # as typed
    kind: str                      # held, p99, p999, late, keep
    limit: float = 0.0             # ns (pNN), a share (late, keep)
    other: int | None = None       # keep: the group kept

    @property
    def figure(self) -> str:
        """The figure judged, as the table's column names it."""
        return {"held": "streams not held", "late": "late share", "keep": "bw kept"}.get(
            self.kind, f"{self.kind}(us)")


@dataclass(frozen=True)
class Judged:
    value: float | None            # the figure, in the column's unit (None: not measured)
    passed: bool
    why: str = ""                  # what failed, in words ('' when it passed)
    flag: str = ""                 # a figure not resolved (too few transfers for the tail)


def parse(texts: list[str], keeps: list[str], plan: Plan, group: int) -> list[Criterion]:
    """The criteria, each checked against the plan (UsageError: one line, exit 2); `held`
    when none is given and the plan has streams."""
    g = plan.groups[group]
    family = KINDS[g.action].family
    streams = [x.index for x in plan.groups if KINDS[x.action].family == "streams"]
    out = []
    for text in texts or (["held"] if streams else []):
        t = text.strip()
        if t == "held":
            if not streams:
                raise UsageError("capacity: --until held: the plan has no streams")
            out.append(Criterion(text, "held"))
        elif m := PERCENTILE.match(t):
            if family == "cpu":
                raise UsageError(f"capacity: --until {text}: group {group} ({g.text}) measures "
                                 f"no latency")
            out.append(Criterion(text, m.group(1), positive(float(m.group(2)), text)
                                 * NS[m.group(3)]))
        elif m := LATE.match(t):
            if family != "streams":
                raise UsageError(f"capacity: --until {text}: group {group} ({g.text}) has no "
                                 f"frames")
            out.append(Criterion(text, "late", positive(float(m.group(1)), text)))
        else:
            raise UsageError(f"capacity: --until {text}: not a criterion (held, p99<10ms, "
                             f"p999<500us, late<0.01)")
    for text in keeps:
        m = KEEP.match(text.strip())
        if not m:
            raise UsageError(f"capacity: --keep {text}: not a floor (--keep 'Striad bw>0.8')")
        other = named_group(m.group(1), plan, text)
        if other == group:
            raise UsageError(f"capacity: --keep {text}: group {group} is the varied group")
        if plan.wired(other):
            raise UsageError(f"capacity: --keep {text}: group {other} is a stage wired by -from "
                             f"(it cannot run alone): keep a group that is not wired")
        if KINDS[plan.groups[other].action].family in ("cpu", "timer"):
            raise UsageError(f"capacity: --keep {text}: group {other} "
                             f"({plan.groups[other].text}) has no bandwidth")
        out.append(Criterion(text, "keep", float(m.group(2)), other))
    if not out:
        raise UsageError("capacity: no criterion: give --until (p99<10ms, late<0.01) or "
                         "--keep; 'held' needs streams in the plan")
    return out


def positive(limit: float, text: str) -> float:
    """An upper limit no figure can be below is refused: no run could pass."""
    if limit <= 0:
        raise UsageError(f"capacity: --until {text}: no run can meet it (its figure is never "
                         f"below 0): give a limit above 0")
    return limit


def named_group(name: str, plan: Plan, text: str) -> int:
    """A group by its index or its action's name (one group only)."""
    if name.isdigit() and int(name) < len(plan.groups):
        return int(name)
    found = [g.index for g in plan.groups if g.action.lower() == name.lstrip("-").lower()]
    if len(found) != 1:
        raise UsageError(f"capacity: --keep {text}: " + (
            f"no group runs -{name.lstrip('-')}" if not found else
            f"groups {', '.join(map(str, found))} run -{name.lstrip('-')}: name one by its index "
            f"(--keep '{found[0]} bw>...')"))
    return found[0]


def tests_of(doc: dict[str, Any], group: int) -> list[dict[str, Any]]:
    return [t for t in doc["tests"] if t["group"] == group]


def bandwidth(doc: dict[str, Any], group: int) -> float:
    """A group's bandwidth in a run: its processes' MB/s summed."""
    return sum(t["table"]["bw"] for t in tests_of(doc, group) if t["table"])


def latency(doc: dict[str, Any], group: int) -> Stats:
    """The group's latency (or lateness) histograms merged."""
    return merge(Stats(r["lat_count"], r["lat_min"], r["lat_max"], r["lat_sum"],
                       tuple((bucket(lo), n) for lo, _, n in r["hist"]))
                 for r in (t["record"] for t in tests_of(doc, group)))


def judge(c: Criterion, doc: dict[str, Any], group: int, alone: dict[int, float]) -> Judged:
    """One criterion on one run's results document; `alone`: --keep's bandwidths alone."""
    broke = ([f"interrupted by {doc['interrupted']}"] if doc.get("interrupted") else []) + \
        [*doc.get("failures", ()), *(doc.get("cut_short") or ())]
    if broke:
        return Judged(None, False, f"the run did not finish: {broke[0]}")
    if c.kind == "held":
        missed = [t for t in doc["tests"]
                  if (t.get("streams") or {}).get("verdict") not in (None, "HELD")]
        if not missed:
            return Judged(0, True)
        t = missed[0]
        s = next((s for k, s in sorted(t["streams"].items())
                  if k.startswith("sub") and s and s["verdict"] != "HELD"), None)
        said = f" ({s['sub']}: {s['late']} lost, {s['dropped']} dropped of {s['frames']} " \
               f"frames, lateness max {s['lateness_max'] / 1e3:.1f} us)" if s else ""
        where = f"group {t['group']}" + (f", rank {t['rank']} on {t['host']}" if "rank" in t
                                         else "")          # (under mpiexec: the job's tests)
        return Judged(len(missed), False, f"stream proc {t['proc']} ({where}) "
                                          f"{t['streams']['verdict']}{said}")
    if c.kind == "late":
        subs = [s for t in tests_of(doc, group) for k, s in (t.get("streams") or {}).items()
                if k.startswith("sub") and s]
        frames = sum(s["frames"] for s in subs)
        late = sum(s["late"] + s["dropped"] for s in subs)
        if not frames:
            return Judged(None, False, f"group {group}: no frame was due")
        share = late / frames
        return Judged(share, share < c.limit, "" if share < c.limit else
                      f"group {group}: {late} of {frames} frames lost or dropped "
                      f"({share:.4f}, not below {c.limit:g})")
    if c.kind == "keep":
        kept = bandwidth(doc, c.other) / alone[c.other]
        return Judged(kept, kept > c.limit, "" if kept > c.limit else
                      f"group {c.other}: {bandwidth(doc, c.other):.1f} MB/s, {kept:.3f} of its "
                      f"{alone[c.other]:.1f} MB/s alone (not above {c.limit:g})")
    got = latency(doc, group)
    if not got.count:
        return Judged(None, False, f"group {group}: no {c.kind} measured (no transfer)")
    q = QUANTILE[c.kind]
    ns = got.percentile(q)
    need = round(1 / (1 - q))
    flag = f"{c.kind} from {got.count} transfers (it needs {need}: an interpolation near the " \
           f"max)" if got.count < need else ""
    return Judged(ns / 1e3, ns < c.limit, "" if ns < c.limit else
                  f"group {group}: {c.kind} {ns / 1e3:.1f} us, not below {c.text.split('<')[1]}",
                  flag)
