"""Summary: the latency statistics every test keeps (min, max, sum, count, log histogram)."""
from __future__ import annotations

import numpy as np
import pytest

from torque_async.stats import BATCH, HIST_BUCKETS, SUB_BITS, Summary, bucket, buckets


def reference_bucket(ns: int) -> int:
    """The bucket rule written out with Python's exact bit_length."""
    b = ns.bit_length()
    if b <= SUB_BITS:
        return b << SUB_BITS
    return (b << SUB_BITS) | ((ns >> (b - 1 - SUB_BITS)) & ((1 << SUB_BITS) - 1))


EDGES = sorted({v for p in range(63) for v in ((1 << p) - 1, 1 << p, (1 << p) + 1)
                if v < 1 << 62} | {0, 5, 6, 7, 1000, 123_456_789})


def test_buckets_follow_the_rule_at_every_power_of_two_and_for_negative_values():
    values = np.array(EDGES + [-v for v in EDGES if v] + list(range(-300, 300)), np.int64)
    got = buckets(values)
    assert got.tolist() == [reference_bucket(int(v)) for v in values]
    assert got.min() >= 0 and got.max() < HIST_BUCKETS
    assert [bucket(v) for v in (0, 1, 7, 8, 1 << 40)] == [reference_bucket(v) for v in
                                                           (0, 1, 7, 8, 1 << 40)]


@pytest.mark.parametrize("n", [0, 1, BATCH - 1, BATCH, 2 * BATCH + 17])
def test_values_held_in_the_batch_are_all_counted_once(n):
    rng = np.random.default_rng(n)
    values = rng.integers(-5000, 10**9, n).tolist()
    s = Summary()
    for i, v in enumerate(values):
        s.add(v)
        if i == n // 3:
            s.settle()                       # an early read settles what it holds so far
    s.settle().settle()                      # settling again changes nothing
    expect = np.zeros(HIST_BUCKETS, np.int64)
    for v in values:
        expect[reference_bucket(v)] += 1
    assert s.count == n and s.total == sum(values)
    assert (s.lo, s.hi) == ((min(values), max(values)) if values else (0, 0))
    assert s.hist.tolist() == expect.tolist()


def test_a_full_batch_is_folded_without_settle():
    s = Summary()
    for v in range(BATCH):
        s.add(v)
    assert s.count == BATCH and s.hi == BATCH - 1 and s.held == 0


def test_without_values_every_figure_is_0_and_negative_values_are_kept_as_they_are():
    s = Summary().settle()
    assert (s.count, s.lo, s.hi, s.total) == (0, 0, 0, 0)      # no sentinel for "none"
    for v in (-7, -3):                                         # -cyclic: woke before a deadline
        s.add(v)
    assert (s.settle().lo, s.hi) == (-7, -3)
