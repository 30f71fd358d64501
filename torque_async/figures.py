"""A test's main figures, and what -repeat and -baseline make of them (pure functions).

The main figures say how well a test did in one number each: bandwidth and IO/s with latency
p50 and p99 for the transfer tests, late frames, bandwidth and lateness p99 for a stream, p99
and max wake-up lateness for -cyclic, loops/s for spinWait; and for each its CPU share (its
process's CPU time over its measured interval; a loop test's: the loop thread's). -repeat
gives each its median, min-max, spread, standard deviation and CV over the repetitions;
-baseline its change from the test running alone, the tests ranked by the change in their
headline figure (Rank: its interval, and within noise when it lies within the alone runs'
spread).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable

from .kinds import KINDS
from .plan import Proc
from .results import Record
from .significance import Finding, Spread, sample_test
from .stats import Stats, merge
from .units import mb_per_s, per_s


def lateness(rec: Record) -> Stats:
    """A stream's sub-streams' lateness as one distribution (their histograms merged)."""
    return merge(s.lateness for s in rec.subs)


def us(stats: Stats, q: float | None) -> float | None:
    """A percentile (q) or the maximum (None) in us; None without values."""
    if not stats.count:
        return None
    return (stats.hi if q is None else stats.percentile(q)) / 1000


@dataclass(frozen=True)
class Figure:
    name: str                      # the JSON key
    label: str                     # as the report prints it
    higher_is_better: bool
    value: Callable[[Record], float | None]


FIGURES = {f.name: f for f in (
    Figure("bw", "BW(MB/s)", True, lambda r: mb_per_s(r.bytes, r.elapsed)),
    Figure("iops", "IO/s", True, lambda r: per_s(r.transfers, r.elapsed)),
    Figure("p50_us", "p50(us)", False, lambda r: us(r.lat, 0.5)),
    Figure("p99_us", "p99(us)", False, lambda r: us(r.lat, 0.99)),
    Figure("max_us", "max(us)", False, lambda r: us(r.lat, None)),
    Figure("late", "late frames", False, lambda r: sum(s.late for s in r.subs)),
    Figure("late_p99_us", "lateness p99(us)", False, lambda r: us(lateness(r), 0.99)),
    Figure("loops_per_s", "loops/s", True, lambda r: per_s(r.ops, r.elapsed)),
    Figure("cpu_pct", "CPU(%)", True,             # of its process (a loop test: the loop's);
           lambda r: 100 * (r.cpu_user + r.cpu_sys) / r.elapsed    # none counted: not measured
           if r.cpu_user + r.cpu_sys else None),
    Figure("wait_pct", "CPU wait(%)", False,      # runnable, waiting on a run queue
           lambda r: r.wait_pct if r.cpu_user + r.cpu_sys else None),
)}
# The figures of each family (others: the transfer tests'), the one that ranks first; each
# family's last, its wait for a CPU, says whether a test slowed together for want of a CPU.
BY_FAMILY = {"cpu": ("loops_per_s", "cpu_pct", "wait_pct"),
             "timer": ("p99_us", "max_us", "cpu_pct", "wait_pct"),
             "streams": ("late", "bw", "late_p99_us", "cpu_pct", "wait_pct")}
TRANSFERS = ("bw", "iops", "p50_us", "p99_us", "cpu_pct", "wait_pct")
CPU_WAITED = 10                    # -baseline: percentage points of its time more spent
                                   # waiting for a CPU together than alone


def names(proc: Proc) -> tuple[str, ...]:
    return BY_FAMILY.get(KINDS[proc.group.action].family, TRANSFERS)


def main_figures(rec: Record, proc: Proc) -> dict[str, float | None]:
    """Every figure's value for this test: None where it does not apply or nothing was
    measured."""
    mine = names(proc) if rec.measured else ()
    return {name: f.value(rec) if name in mine else None for name, f in FIGURES.items()}


def spreads(runs: list[dict[str, float | None]]) -> dict[str, Spread]:
    """Each figure's Spread over runs (the main figures of one test in each repetition);
    figures missing from any run are left out."""
    return {name: Spread.of([r[name] for r in runs]) for name in FIGURES
            if runs and all(r[name] is not None for r in runs)}


def medians(runs: list[dict[str, float | None]]) -> dict[str, float | None]:
    """The main figures of one test over its repetitions, each its median."""
    got = spreads(runs)
    return {name: got[name].median if name in got else None for name in FIGURES}


@dataclass(frozen=True)
class Change:
    """One figure of one test, alone and together."""
    proc: int
    test: str
    figure: Figure
    alone: float
    together: float

    @property
    def change_pct(self) -> float | None:
        """The change in per cent; None from nothing to something ("new"); 0 from 0 to 0."""
        if not self.alone:
            return 0.0 if self.together == self.alone else None
        return 100 * (self.together - self.alone) / self.alone

    @property
    def slowdown(self) -> float:
        """How many times worse together than alone (below 1: better); inf from nothing."""
        good, bad = (self.alone, self.together) if self.figure.higher_is_better else \
            (self.together, self.alone)
        if good == bad:
            return 1.0
        return good / bad if bad else math.inf


# The figure each family is ranked by (others: their first, names()): a stream's bandwidth,
# as a count of late frames from 0 is no change comparable to another test's
HEADLINE = {"streams": "bw"}
WITHIN_NOISE, ONE_RUN = "within noise", "one run"


@dataclass(frozen=True)
class Rank:
    """-baseline: one test's change in its headline figure, alone to together: `finding` (its
    samples compared, significance.sample_test: the change and its 95% interval), `noise`:
    '' ranked; WITHIN_NOISE, the change lies within the alone runs' own spread (their min-max)
    or its interval holds 0; ONE_RUN, a run alone or together had no repetition (no spread
    measured: ranked by its point change, and saying so)."""
    proc: int
    test: str
    figure: Figure
    finding: Finding
    noise: str = ""

    @property
    def loss_pct(self) -> float:
        """How much worse together, in % of alone (negative: better); from 0, infinite."""
        pct = self.finding.pct
        if pct is None:
            return math.inf * self.finding.direction(not self.figure.higher_is_better)
        return -pct if self.figure.higher_is_better else pct


def headline(proc: Proc) -> str:
    family = KINDS[proc.group.action].family
    return HEADLINE.get(family, names(proc)[0])


def rank(proc: Proc, label: str, alone: list[float], together: list[float]) -> Rank:
    figure = FIGURES[headline(proc)]
    found = sample_test(alone, together, ranks=not figure.higher_is_better)
    if len(alone) < 2 or len(together) < 2:
        noise = ONE_RUN
    else:
        inside = min(alone) <= statistics.median(together) <= max(alone)
        interval = found.low is None or found.low <= 0 <= found.high
        noise = WITHIN_NOISE if inside or interval else ""
    return Rank(proc.row, label, figure, found, noise)


def changes(alone: list[dict[str, float | None]], together: list[dict[str, float | None]],
            procs: tuple[Proc, ...], alone_runs: list[list[dict]] | None = None,
            together_runs: list[list[dict]] | None = None) -> tuple[list[Change], list[Rank]]:
    """Every figure measured both alone and together (the medians), test by test, and each
    test's Rank (its headline figure's change, from the repetitions: `alone_runs` and
    `together_runs` hold each test's main figures in each run; without them the medians, one
    run each); the tests ordered by their loss, the largest first, those within noise after
    the ranked ones."""
    alone_runs = alone_runs or [[a] for a in alone]
    together_runs = together_runs or [[t] for t in together]
    per_test = []
    for a, t, proc, ra, rt in zip(alone, together, procs, alone_runs, together_runs):
        label = KINDS[proc.group.action].label
        mine = [Change(proc.row, label, f, a[name], t[name]) for name, f in FIGURES.items()
                if a[name] is not None and t[name] is not None]
        if not mine:
            continue
        name = headline(proc)
        va, vt = [r[name] for r in ra if r[name] is not None], \
            [r[name] for r in rt if r[name] is not None]
        ranked = rank(proc, label, va, vt) if va and vt else None
        per_test.append((ranked, mine))
    per_test.sort(key=lambda got: (got[0] is None, got[0] is not None and got[0].noise ==
                                   WITHIN_NOISE, -got[0].loss_pct if got[0] else 0))
    return [c for _, cs in per_test for c in cs], [r for r, _ in per_test if r]
