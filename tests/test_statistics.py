"""significance.py: the stated tests (numbers checked against scipy.stats), Holm's correction on
constructed families, zero variance, and compare's matching by position and its family on
constructed results documents (a planted change found, a null not)."""
from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import stats as sst

from torque_async import compare, significance as sig

from test_compare import PLAN, document, repeated


A = [101.0, 98.5, 103.2, 99.1, 100.4]
B = [94.0, 96.2, 92.8, 95.5, 93.9]


def test_welch_s_p_and_interval_are_scipy_s():
    f = sig.sample_test(A, B)
    ref = sst.ttest_ind(B, A, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert f.test == sig.WELCH and f.p == pytest.approx(ref.pvalue, rel=1e-12)
    assert (f.low, f.high) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert f.change == pytest.approx(np.mean(B) - np.mean(A)) and f.significant
    assert f.pct_interval == (pytest.approx(100 * ci.low / np.mean(A)),
                              pytest.approx(100 * ci.high / np.mean(A)))
    assert f.verdict(higher_is_better=True) == "worse" and f.verdict(False) == "better"


def test_mann_whitney_s_p_is_scipy_s_and_its_interval_a_seeded_bootstrap():
    lat_a, lat_b = [20.0, 22.5, 19.0, 25.0, 21.0], [30.0, 28.5, 35.0, 29.0, 31.0]
    f = sig.sample_test(lat_a, lat_b, ranks=True)
    ref = sst.mannwhitneyu(lat_b, lat_a, alternative="two-sided")
    assert f.test == sig.MANN_WHITNEY and f.p == pytest.approx(ref.pvalue)
    assert f.p == pytest.approx(2 / 252)              # exact: the most extreme of C(10, 5)
    assert (f.a, f.b) == (21.0, 30.0)                 # medians
    assert f.low <= f.change <= f.high and f.low > 0
    assert sig.sample_test(lat_a, lat_b, ranks=True) == f        # seeded: the same interval
    rng = np.random.default_rng(sig.SEED)             # the bootstrap, written out: of the
    ra = np.median(rng.choice(lat_a, (sig.BOOTSTRAP, 5)), axis=1)      # ratio of the medians
    rb = np.median(rng.choice(lat_b, (sig.BOOTSTRAP, 5)), axis=1)
    ratio = np.quantile(rb / ra, (0.025, 0.975))
    assert [f.low, f.high] == pytest.approx(list((ratio - 1) * 21))
    late_a, late_b = [0, 2, 1, 0, 3], [4, 5, 6, 5, 7]               # a 0 in A: of the difference
    g = sig.sample_test(late_a, late_b, ranks=True)
    rng = np.random.default_rng(sig.SEED)
    ra = np.median(rng.choice(late_a, (sig.BOOTSTRAP, 5)), axis=1)
    rb = np.median(rng.choice(late_b, (sig.BOOTSTRAP, 5)), axis=1)
    assert (g.low, g.high) == tuple(np.quantile(rb - ra, (0.025, 0.975)))


def test_a_latency_s_interval_never_reaches_past_minus_100_percent():
    """A p99 whose runs in A spread from 10 to 100 us, all about 1 us in B: the difference of
    resampled medians reached -99 us, -900% of A's median (11 us); a latency cannot fall by
    more than all of it."""
    f = sig.sample_test([10.0, 10.0, 11.0, 100.0, 100.0], [1.0, 1.2, 0.9, 2.0, 1.1], ranks=True)
    assert -100 < f.pct_interval[0] <= f.pct <= f.pct_interval[1] < 0
    assert f.interval_text("us") == \
        f"95% CI {f.pct_interval[0]:+.1f}% to {f.pct_interval[1]:+.1f}%"


def test_a_welch_interval_past_minus_100_percent_is_flagged_not_printed_as_a_bound():
    f = sig.sample_test([100.0, 100.5, 99.5], [5.0, 90.0, 20.0])     # a wide B, three runs
    assert f.pct_interval[0] < -100                                  # (Welch's own interval)
    assert f.interval_text("MB/s") == \
        f"95% CI below -100% (too few runs for the spread) to {f.pct_interval[1]:+.1f}%"
    zero = sig.sample_test([0.0, 0.0, 0.0], [2.0, 3.0, 4.0])          # from 0: in the unit
    assert zero.interval_text("frames") == \
        f"95% CI {zero.low:+.1f} frames to {zero.high:+.1f} frames"


def test_a_welch_interval_excludes_zero_exactly_when_p_is_below_alpha():
    rng = random.Random(7)
    for _ in range(50):
        a = [rng.gauss(100, 5) for _ in range(5)]
        b = [rng.gauss(100 + rng.choice((0, 8)), 5) for _ in range(5)]
        f = sig.sample_test(a, b)
        assert (f.low > 0 or f.high < 0) == (f.p < sig.ALPHA)


@pytest.mark.parametrize("a, b, why", [
    ([100.0] * 5, [100.0001] * 5, sig.UNTESTABLE),     # any difference read as significant
    ([0, 0, 0], [1, 1, 1], sig.UNTESTABLE),            # late frames
    ([3.0] * 4, [3.0] * 4, sig.SAME),
    ([100.0], [50.0, 60.0], sig.ONE_RUN)])
def test_no_spread_on_either_side_or_one_run_is_no_test(a, b, why):
    f = sig.sample_test(a, b, ranks=isinstance(a[0], int))
    assert (f.test, f.p, f.why, f.significant) == (None, None, why, False)
    assert f.verdict(True) == why


def test_no_spread_on_one_side_only_is_still_tested():
    f = sig.sample_test([100.0] * 5, [90.0, 91.0, 89.5, 90.2, 90.8])
    assert f.test == sig.WELCH and f.significant


def test_holm_on_a_constructed_family():
    # m = 5: thresholds 0.01, 0.0125, 0.0167, 0.025, 0.05 by rank
    assert sig.holm([0.001, 0.011, 0.02, 0.04, 0.3]) == [True, True, False, False, False]
    # 0.02 fails its 0.0167: every larger p stays, even 0.024 < 0.025
    assert sig.holm([0.02, 0.001, 0.024, 0.011, 0.3]) == [False, True, False, True, False]
    assert sig.holm([0.04, 0.04]) == [False, False]   # 0.04 > 0.05 / 2: neither alone passes
    assert sig.holm([0.01, 0.04]) == [True, True]     # 0.01 <= 0.025, then 0.04 <= 0.05
    assert sig.holm([None, 0.03, None]) == [False, True, False]   # no test: not in the family
    assert sig.holm([]) == []


def test_decide_marks_the_family_and_keeps_the_numbers():
    found = [sig.sample_test(A, B), sig.sample_test(A, [x + 0.5 for x in A]),
             sig.sample_test([1.0] * 3, [2.0] * 3)]
    out = sig.decide(found)
    assert [f.significant for f in out] == [True, False, False]
    assert [f.p for f in out] == [f.p for f in found] and sig.family_size(out) == 2


def test_spread_gives_median_sd_and_cv_and_a_single_value_none():
    s = sig.Spread.of([90.0, 100.0, 110.0])
    assert (s.median, s.sd, s.cv_pct) == (100.0, 10.0, 10.0)
    assert s.text() == "100.0 (sd 10.0; CV 10.0%)"
    one = sig.Spread.of([42.0])
    assert one.sd is None and one.text() == "42.0 (one run: no spread measured)"


SWEEP_A, SWEEP_B = "-n 8 -MB 4 -load -KB 64 -bcopy", "-n 8 -MB 1 -load -KB 4 -bcopy"


def test_match_position_compares_a_sweep_that_identity_cannot():
    """-MB 4 against -MB 1: 'only in A / only in B', 0 worse, 0 better, exit 0."""
    a = document(SWEEP_A, {"load": 1000, "bcopy": 500})
    b = document(SWEEP_B, {"load": 400, "bcopy": 450})
    assert len(compare.compare(a, b).only_a) == 2
    found = compare.compare(a, b, "position")
    assert not found.only_a and not found.only_b
    bw = {c.test: c.b for c in found.changes if c.figure == "BW"}
    assert bw == {"-n 8 -MB 4 -load | -n 8 -MB 1 -load [process 0]": (400.0,),
                  "-KB 64 -bcopy | -KB 4 -bcopy [process 0]": (450.0,)}
    assert compare.plan_difference(a, b) == f"A: {SWEEP_A} -slow; B: {SWEEP_B} -slow"


def test_a_one_host_run_matches_rank_0_and_a_rank_s_dir_tag_is_no_difference():
    """A plain run and an mpiexec -n 1 run of one plan: 'nothing compared', and a 'plans
    differ' note whose two texts were the same (the rank's scratch directory name)."""
    a = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    b = document(PLAN, {"load": 990, "bcopy": 500, "spinWait": 100})
    for t in b["tests"]:
        t["rank"], t["host"] = 0, "vm"
    for g in b["plan"]["groups"]:
        g["locals"]["dir"] += ".vm.r0"
    b["cluster"] = {"ranks": [{"rank": 0}], "hosts": []}
    found = compare.compare(a, b)
    assert not found.only_a and len(found.changes) == 6
    assert not any("plans differ" in line for line in compare.provenance(a, b))
    c = document(PLAN, {"load": 1000, "bcopy": 500, "spinWait": 100})
    c["plan"]["groups"][1]["locals"]["bt"] = 7            # same text, another default
    (note,) = [ln for ln in compare.provenance(a, c) if "plans differ" in ln]
    assert "the same text, but group 1: -bt 100 in A, 7 in B" in note


def noisy(seed: int, scale: float = 1.0) -> list[dict[str, float]]:
    rng = random.Random(seed)
    return [{"load": 1000 * scale * rng.gauss(1, 0.03), "bcopy": 500 * rng.gauss(1, 0.03),
             "spinWait": 100 * rng.gauss(1, 0.03)} for _ in range(5)]


def test_a_planted_change_is_found_and_a_null_is_not_over_many_families():
    """Constructed documents with 3% noise: of 100 null compares at most 5% flag any figure
    (these seeds: 3; uncorrected, p < 0.05 per figure: 9), and every one with the load planted
    20% slower flags it, and only it."""
    flagged, found = 0, 0
    for k in range(100):
        base = repeated(PLAN, noisy(2 * k))
        null = compare.compare(base, repeated(PLAN, noisy(2 * k + 1)))
        flagged += any(c.counted for c in null.changes)
        slow = compare.compare(base, repeated(PLAN, noisy(2 * k + 1, 0.8)))
        hits = {(c.test.split(" [")[0], c.figure) for c in slow.changes if c.regression(5)}
        found += hits == {("-n 8 -MB 4 -load", "BW")}
        assert null.family == slow.family == 3            # load, bcopy, spinWait: IO/s follows
    assert flagged <= 5 and found == 100


def test_two_groups_alike_are_two_findings_each_with_its_own_decision():
    """Two identical groups share a name ('-n 8 -MB 4 -load [process 0]'): one's decision was
    taken for both."""
    twice = "-n 8 -MB 4 -load -n 8 -MB 4 -load"
    base = [{"load": v} for v in (1000, 985, 1012, 995, 1008)]
    a = repeated(twice, base)
    b = repeated(twice, base)
    for run in b["repeats"]["runs"]:
        run["tests"][1]["figures"]["bw"] *= 0.7              # the second group only
        run["tests"][1]["figures"]["iops"] *= 0.7
    found = compare.compare(a, b)
    assert found.family == 2
    assert [(c.figure, c.significant) for c in found.changes if c.role != compare.TOTAL] == \
        [("BW", False), ("IO/s", False), ("BW", True), ("IO/s", True)]
