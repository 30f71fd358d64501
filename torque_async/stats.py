"""Statistics of ns values (latency, lateness, wake-ups): the Summary a test fills while it
measures, and the Stats read back from a results row; both share one log histogram.

The histogram is fio's (FIO_IO_U_PLAT_BITS = 6): values below 2**7 ns have a bucket each;
above, every power of two is cut into 64 buckets of equal width, so a bucket is at most 1/64
(1.6%) of its lower bound wide. Values of 2**TOP_BITS ns (18 minutes) and more share the last
bucket (their percentiles are clamped to the maximum, which is exact). Negative values (a
-cyclic wake-up before its deadline) are counted by their magnitude.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

SUB_BITS = 6                       # 2**SUB_BITS buckets per power of two of ns
SUB = 1 << SUB_BITS
TOP_BITS = 40                      # bucketed exactly up to 2**40 ns
HIST_BUCKETS = (TOP_BITS - SUB_BITS + 1) * SUB
EXACT = 2 * SUB                    # values below this have a bucket of their own



def buckets(ns: np.ndarray) -> np.ndarray:
    """Histogram bucket of each value: exact below EXACT, else its power of two (bit length b)
    and the SUB_BITS bits below its top one."""
    ns = np.abs(np.asarray(ns, dtype=np.int64))
    b = np.frexp(ns.astype(np.float64))[1]      # bit length (exact below 2**53; above, past
                                                # TOP_BITS anyway: the last bucket)
    shift = np.maximum(b - 1 - SUB_BITS, 0)
    index = np.where(ns < EXACT, ns, ((b - SUB_BITS) << SUB_BITS) | ((ns >> shift) & (SUB - 1)))
    return np.minimum(index, HIST_BUCKETS - 1)


def bucket(ns: int) -> int:
    """The bucket of one value (used by tests, to build histograms)."""
    return int(buckets(ns))


def bucket_range(i: int) -> tuple[int, int]:
    """The smallest and the largest value (ns) that fall in bucket i."""
    if i < EXACT:
        return i, i
    shift = (i >> SUB_BITS) - 1                  # the bits below the top SUB_BITS + 1
    lo = (SUB + (i & (SUB - 1))) << shift
    return lo, lo + (1 << shift) - 1


def sparse(hist) -> tuple[tuple[int, int], ...]:
    """A dense histogram as (bucket, count) pairs of its non-empty buckets, in order."""
    hist = np.asarray(hist)
    full = np.flatnonzero(hist)
    return tuple(zip(full.tolist(), hist[full].tolist()))


BATCH = 1024                       # values a Summary holds before folding them in


class Summary:
    """min, max, sum, count and log histogram of a series of ns values. Transfer latencies,
    stream lateness and timer wake-ups all use it. add() stores the value in a preallocated
    batch (no allocation, no arithmetic on the transfer's path); every BATCH values, and when
    settle() is called, numpy folds the batch into the figures: readers call settle() first.
    With no value counted every figure is 0 (count == 0 says there is none)."""
    __slots__ = ("count", "lo", "hi", "total", "hist", "batch", "held")

    def __init__(self):
        self.count, self.lo, self.hi, self.total = 0, 0, 0, 0
        self.hist = np.zeros(HIST_BUCKETS, np.int64)
        self.batch, self.held = [0] * BATCH, 0

    def add(self, ns: int) -> None:
        i = self.held
        self.batch[i] = ns
        self.held = i + 1
        if i + 1 == BATCH:
            self.settle()

    def settle(self) -> "Summary":
        """Fold the values held into the figures; returns the summary."""
        if self.held:
            v = np.array(self.batch[:self.held], dtype=np.int64)
            lo, hi = int(v.min()), int(v.max())
            self.lo, self.hi = (min(self.lo, lo), max(self.hi, hi)) if self.count else (lo, hi)
            self.count += v.size
            self.total += int(v.sum())
            self.hist += np.bincount(buckets(v), minlength=HIST_BUCKETS)
            self.held = 0
        return self

    def stats(self) -> "Stats":
        self.settle()
        return Stats(self.count, self.lo, self.hi, self.total, sparse(self.hist))


PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999), ("p9999", 0.9999))


@dataclass(frozen=True)
class Stats:
    """count, min, max, sum and sparse log histogram ((bucket, count) pairs) of ns values, as
    read back from a row or merged from several."""
    count: int
    lo: int
    hi: int
    total: int
    hist: tuple[tuple[int, int], ...]

    @property
    def avg(self) -> int:
        return self.total // self.count if self.count else 0

    def percentile(self, q: float) -> int:
        """The value under which a share q of the values fell: in the bucket holding the value
        of rank ceil(q x count), interpolated linearly over the part of the bucket between the
        minimum and the maximum (so within one bucket's width of the true value)."""
        want, seen = q * self.count, 0
        for i, n in self.hist:
            if seen + n >= want:
                lo, hi = bucket_range(i)
                lo, hi = max(lo, self.lo), min(hi, self.hi)
                return min(max(lo + int((hi - lo) * max(want - seen, 0) / n), self.lo), self.hi)
            seen += n
        return self.hi

    def percentiles(self) -> dict[str, int]:
        return {name: self.percentile(q) for name, q in PERCENTILES}


def merge(parts: Iterable[Stats]) -> Stats:
    """The Stats of all the values of several: histograms summed, the extremes of extremes."""
    full = [s for s in parts if s.count]
    if not full:
        return Stats(0, 0, 0, 0, ())
    hist: dict[int, int] = {}
    for s in full:
        for i, n in s.hist:
            hist[i] = hist.get(i, 0) + n
    return Stats(sum(s.count for s in full), min(s.lo for s in full), max(s.hi for s in full),
                 sum(s.total for s in full), tuple(sorted(hist.items())))
