"""Summary: the latency statistics every test keeps (min, max, sum, count, log histogram), and
the Stats read back: fio's histogram, interpolated percentiles, merging."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from torque_async.stats import (BATCH, HIST_BUCKETS, PERCENTILES, Stats, Summary, bucket,
                                bucket_range, buckets, merge)


def reference_bucket(ns: int) -> int:
    """fio's plat_val_to_idx (FIO_IO_U_PLAT_BITS 6), with the last bucket for what is above."""
    ns = abs(ns)
    msb = ns.bit_length() - 1
    if msb <= 6:
        return ns
    error_bits = msb - 6
    return min(((error_bits + 1) << 6) + ((ns >> error_bits) & 63), HIST_BUCKETS - 1)


EDGES = sorted({v for p in range(63) for v in ((1 << p) - 1, 1 << p, (1 << p) + 1)
                if v < 1 << 62} | {0, 5, 6, 7, 1000, 123_456_789})


def test_buckets_follow_the_rule_at_every_power_of_two_and_for_negative_values():
    values = np.array(EDGES + [-v for v in EDGES if v] + list(range(-300, 300)), np.int64)
    got = buckets(values)
    assert got.tolist() == [reference_bucket(int(v)) for v in values]
    assert got.min() >= 0 and got.max() < HIST_BUCKETS
    assert [bucket(v) for v in (0, 1, 7, 8, 1 << 40)] == [reference_bucket(v) for v in
                                                           (0, 1, 7, 8, 1 << 40)]


def test_buckets_tile_the_values_at_64_per_power_of_two_and_under_1_6_percent_wide():
    assert bucket_range(0) == (0, 0) and bucket_range(127) == (127, 127)
    assert bucket_range(128) == (128, 129)           # past 2**7: 64 buckets per power of two
    assert HIST_BUCKETS >= 64 * (40 - 6)             # tens of ns to 2**40 ns (18 minutes)
    for i in range(HIST_BUCKETS - 1):
        lo, hi = bucket_range(i)
        assert bucket_range(i + 1)[0] == hi + 1 and bucket(lo) == bucket(hi) == i
        assert hi - lo + 1 <= max(1, lo / 64)
    assert bucket(1 << 45) == HIST_BUCKETS - 1       # beyond: the last bucket


def stats_of(values) -> Stats:
    s = Summary()
    for v in values:
        s.add(int(v))
    return s.stats()


def exact(values, q: float) -> int:
    """The value of rank ceil(q x n): what a percentile must come within a bucket of."""
    return int(np.percentile(np.asarray(values), 100 * q, method="inverted_cdf"))


def within_a_bucket(got: int, want: int) -> bool:
    lo, hi = bucket_range(bucket(want))
    return abs(got - want) <= hi - lo and abs(got - want) <= max(1, want / 64)


values_ns = st.lists(st.one_of(st.integers(0, 200), st.integers(0, 10**6),
                               st.integers(0, 1 << 39)), min_size=1, max_size=400)


@settings(max_examples=200, deadline=None)
@given(values_ns)
def test_every_percentile_is_within_one_bucket_under_1_6_percent_of_the_exact_one(values):
    s = stats_of(values)
    for _, q in (*PERCENTILES, (0.0, 0.0), (1.0, 1.0)):
        got, want = s.percentile(q), exact(values, q)
        assert min(values) <= got <= max(values)
        assert within_a_bucket(got, want), (q, got, want)


@settings(max_examples=100, deadline=None)
@given(st.lists(values_ns, min_size=1, max_size=6))
def test_merged_percentiles_are_those_of_all_the_values_not_an_average(groups):
    merged = merge(stats_of(g) for g in groups)
    every = [v for g in groups for v in g]
    assert (merged.count, merged.lo, merged.hi, merged.total) == \
        (len(every), min(every), max(every), sum(every))
    assert merged == stats_of(every)                 # the very histogram of all the values
    for _, q in PERCENTILES:
        assert within_a_bucket(merged.percentile(q), exact(every, q))


def test_interpolation_spreads_a_bucket_and_16_processes_no_longer_print_one_figure():
    # 1000 values spread over 1000..1999 ns: today's 4 buckets per power of two printed 1279
    # for both p50 and p90; within its bucket the percentile follows the values.
    values = list(range(1000, 2000))
    s = stats_of(values)
    assert abs(s.percentile(0.5) - 1499) <= 16 and abs(s.percentile(0.9) - 1899) <= 30
    assert merge([]) == Stats(0, 0, 0, 0, ()) and merge([stats_of([]), s]) == s
    assert stats_of([5, 5, 5]).percentile(0.99) == 5          # exact below 128 ns


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
