"""Is a change noise? Two samples of one figure (its value in each repetition of two runs)
compared by a stated test, with the change's 95% confidence interval, and a family of such
comparisons decided together (Holm), so that dozens of figures do not cry wolf.

- Welch's t-test (unequal variances) of the means, for rates (bandwidth, IO/s, loops/s): the
  change is B's mean minus A's, its interval Welch's (scipy's ttest_ind), so the interval
  excludes 0 exactly when p < 0.05.
- Mann-Whitney U of the medians, for percentiles (latency, lateness) and frame counts, which are
  not normal: the change is B's median minus A's, its interval a seeded percentile bootstrap
  (each side resampled on its own) of the ratio of the medians when A's values are all above 0
  and B's not below (so the interval never reaches past -100%), of their difference otherwise.
- A Welch interval reaching past -100% (a mean falling by more than all of it: a figure that
  cannot be negative, too few repetitions for its spread) is said so, not printed as a bound.
- Fewer than two values on a side: no test ("one run"). No spread on either side (every value of
  A alike, every value of B alike): equal, "no change"; else "untestable" (a difference no
  spread can be measured against), never significant.
- holm(): Holm's step-down correction: the family-wise error rate stays at alpha however many
  figures one compare holds.

compare.py and -baseline use this; `sample_test(a, b)` is the one entry point for others.
"""
from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

ALPHA = 0.05                         # family-wise error rate; each interval is 1 - ALPHA
BOOTSTRAP = 4000                     # resamples of a Mann-Whitney change's interval
SEED = 20261204                      # the bootstrap's seed: one pair of samples, one interval
WELCH, MANN_WHITNEY = "Welch's t", "Mann-Whitney U"
ONE_RUN, UNTESTABLE, SAME = "one run", "untestable", "no change"


@dataclass(frozen=True)
class Finding:
    """Two samples of one figure compared: `test` (WELCH, MANN_WHITNEY, or None when none
    applies, `why` then saying so), the centres compared (means or medians), the change
    B - A with its 95% interval [low, high] in the figure's unit, the two-sided p, and whether
    it is significant (alone: p < ALPHA; in a family: its decision there, see decide())."""
    test: str | None
    a: float                         # A's centre (mean for Welch, median for Mann-Whitney)
    b: float
    low: float | None = None
    high: float | None = None
    p: float | None = None
    why: str = ""                    # ONE_RUN, UNTESTABLE or SAME when test is None
    significant: bool = False

    @property
    def change(self) -> float:
        return self.b - self.a

    @property
    def pct(self) -> float | None:
        """The change in % of A's centre; None from 0."""
        return 100 * self.change / abs(self.a) if self.a else None

    @property
    def pct_interval(self) -> tuple[float, float] | None:
        if self.low is None or not self.a:
            return None
        return 100 * self.low / abs(self.a), 100 * self.high / abs(self.a)

    def interval_text(self, unit: str) -> str:
        """'95% CI -4.1% to -1.2%' (in % of A's centre; from 0 in `unit`); a lower end past
        -100% is flagged ('below -100%: too few runs for the spread'), never printed as a
        bound."""
        got = self.pct_interval
        if got is None:
            return f"95% CI {self.low:+.1f} {unit} to {self.high:+.1f} {unit}"
        low = f"{got[0]:+.1f}%" if got[0] >= -100 else "below -100% (too few runs for the spread)"
        return f"95% CI {low} to {got[1]:+.1f}%"

    def direction(self, higher_is_better: bool) -> int:
        """1: B better than A, -1 worse, 0 equal."""
        up = self.change if higher_is_better else -self.change
        return (up > 0) - (up < 0)

    def verdict(self, higher_is_better: bool) -> str:
        """'worse', 'better', 'not significant', or why there is no test."""
        if self.test is None:
            return self.why
        if not self.significant:
            return "not significant"
        return ("no change", "better", "worse")[self.direction(higher_is_better)]


def sample_test(a: Sequence[float], b: Sequence[float], ranks: bool = False,
                seed: int = SEED) -> Finding:
    """Compare samples a and b of one figure: Welch's t of the means, or with `ranks`
    Mann-Whitney U of the medians (see the module's text); significant at ALPHA alone."""
    a, b = [float(x) for x in a], [float(x) for x in b]
    centre = statistics.median if ranks else statistics.fmean
    ca, cb = centre(a), centre(b)
    if len(a) < 2 or len(b) < 2:
        return Finding(None, ca, cb, why=ONE_RUN)
    if len(set(a)) == 1 and len(set(b)) == 1:
        return Finding(None, ca, cb, why=SAME if ca == cb else UNTESTABLE)
    from scipy import stats as sst        # (here: a run that compares nothing never loads it)
    with warnings.catch_warnings():       # (scipy's precision note on a side of equal values)
        warnings.simplefilter("ignore", RuntimeWarning)
        if ranks:
            p = float(sst.mannwhitneyu(b, a, alternative="two-sided").pvalue)
            low, high = bootstrap_interval(a, b, seed)
        else:
            got = sst.ttest_ind(b, a, equal_var=False)
            p = float(got.pvalue)
            low, high = (float(x) for x in got.confidence_interval(1 - ALPHA))
    test = MANN_WHITNEY if ranks else WELCH
    return Finding(test, ca, cb, low, high, p, significant=p < ALPHA)


def bootstrap_interval(a: list[float], b: list[float], seed: int = SEED) -> tuple[float, float]:
    """The 95% percentile-bootstrap interval of median(b) - median(a), each side resampled
    with replacement BOOTSTRAP times (seeded: the same samples give the same interval): of
    the ratio median(b) / median(a), times median(a), when a > 0 and b >= 0 throughout (a
    latency cannot fall by more than all of it), of the difference otherwise."""
    rng = np.random.default_rng(seed)
    ra = np.median(rng.choice(a, (BOOTSTRAP, len(a))), axis=1)
    rb = np.median(rng.choice(b, (BOOTSTRAP, len(b))), axis=1)
    quantiles = (ALPHA / 2, 1 - ALPHA / 2)
    if min(a) > 0 and min(b) >= 0:
        centre = statistics.median(a)
        low, high = (np.quantile(rb / ra, quantiles) - 1) * centre
    else:
        low, high = np.quantile(rb - ra, quantiles)
    return float(low), float(high)


def holm(ps: Sequence[float | None], alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down decisions for a family of p-values (None: no test, never rejected, not
    counted in the family): the k-th smallest of m is rejected while p <= alpha / (m - k), the
    first that is not stops the rejections."""
    tested = sorted((p, i) for i, p in enumerate(ps) if p is not None)
    out = [False] * len(ps)
    for k, (p, i) in enumerate(tested):
        if p > alpha / (len(tested) - k):
            break
        out[i] = True
    return out


def decide(findings: Sequence[Finding], alpha: float = ALPHA) -> list[Finding]:
    """The findings of one family, each significant as Holm's correction over them decides."""
    return [replace(f, significant=s) for f, s in zip(findings, holm([f.p for f in findings],
                                                                     alpha))]


def family_size(findings: Sequence[Finding]) -> int:
    return sum(f.p is not None for f in findings)


@dataclass(frozen=True)
class Spread:
    """One figure over repetitions: median, min, max, standard deviation (n - 1), and the
    coefficient of variation (sd / mean, %; None with a mean of 0 or a single value)."""
    median: float
    lo: float
    hi: float
    sd: float | None = None          # None: one value, no spread measured
    mean: float = math.nan

    @property
    def spread_pct(self) -> float | None:
        """(max - min) / median, %."""
        return 100 * (self.hi - self.lo) / self.median if self.median else None

    @property
    def cv_pct(self) -> float | None:
        return 100 * self.sd / abs(self.mean) if self.sd is not None and self.mean else None

    @classmethod
    def of(cls, values: Sequence[float]) -> "Spread":
        values = list(values)
        sd = statistics.stdev(values) if len(values) > 1 else None
        return cls(statistics.median(values), min(values), max(values), sd,
                   statistics.fmean(values))

    def text(self, digits: int = 1) -> str:
        """'median (sd S; CV C%)', or 'median (one run: no spread measured)'."""
        if self.sd is None:
            return f"{self.median:.{digits}f} (one run: no spread measured)"
        cv = "NA" if self.cv_pct is None else f"{self.cv_pct:.1f}%"
        return f"{self.median:.{digits}f} (sd {self.sd:.{digits}f}; CV {cv})"
