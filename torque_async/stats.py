"""Statistics of ns values (latency, lateness, wake-ups): the Summary a test fills while it
measures, and the Stats read back from a results row; both share one log histogram.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SUB_BITS = 2                       # latency histogram: 4 buckets per power of two of ns
HIST_BUCKETS = 64 << SUB_BITS


POWERS = 1 << np.arange(63, dtype=np.int64)        # 1, 2, 4, ... 2**62


def buckets(ns: np.ndarray) -> np.ndarray:
    """Histogram bucket of each latency: its power of two (the bit length of |ns|), then the
    next SUB_BITS bits below the top one."""
    ns = np.asarray(ns, dtype=np.int64)
    b = np.searchsorted(POWERS, np.abs(ns), side="right")
    below = (ns >> np.maximum(b - 1 - SUB_BITS, 0)) & ((1 << SUB_BITS) - 1)
    return np.where(b <= SUB_BITS, b << SUB_BITS, (b << SUB_BITS) | below)


def bucket(ns: int) -> int:
    """The bucket of one latency (used by tests, to build histograms)."""
    return int(buckets(ns))


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


def bucket_top(i: int) -> int:
    """The largest latency (ns) that falls in bucket i."""
    b, sub = i >> SUB_BITS, i & ((1 << SUB_BITS) - 1)
    if b <= SUB_BITS:
        return (1 << b) - 1
    width = 1 << (b - 1 - SUB_BITS)
    return (1 << (b - 1)) + (sub + 1) * width - 1


@dataclass(frozen=True)
class Stats:
    """A Summary as read back from a row: count, min, max, sum and log histogram of ns values."""
    count: int
    lo: int
    hi: int
    total: int
    hist: tuple[int, ...]

    @property
    def avg(self) -> int:
        return self.total // self.count if self.count else 0

    def percentile(self, q: float) -> int:
        """The value under which a share q of the values fell, from the histogram."""
        want, seen = q * self.count, 0
        for i, n in enumerate(self.hist):
            seen += n
            if n and seen >= want:
                return min(max(bucket_top(i), self.lo), self.hi)
        return self.hi


def merged(parts) -> Stats:
    """One Stats of several (processes of a group): counts, sums and histograms added, so its
    percentiles are those of every value together (never an average of percentiles)."""
    full = [s for s in parts if s.count]
    if not full:
        return Stats(0, 0, 0, 0, (0,) * HIST_BUCKETS)
    return Stats(sum(s.count for s in full), min(s.lo for s in full), max(s.hi for s in full),
                 sum(s.total for s in full),
                 tuple(int(x) for x in np.sum([s.hist for s in full], axis=0)))
