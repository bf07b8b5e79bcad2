"""The Hodges-Lehmann change and its interval, against brute force and published tables."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.diff.in_step import EXACT_LIMIT, critical_count, shift


def brute_cdf(n: int, m: int) -> list[float]:
    """P(U <= u) of the Mann-Whitney count, by listing every ordering of n base and m new values."""
    counts = [0] * (n * m + 1)
    for base_pos in itertools.combinations(range(n + m), n):
        chosen = set(base_pos)
        u = seen_new = 0
        for k in range(n + m):
            if k in chosen:
                u += seen_new  # new values below this base value
            else:
                seen_new += 1
        counts[u] += 1
    total = sum(counts)
    return list(itertools.accumulate(c / total for c in counts))


@pytest.mark.parametrize(("n", "m"), [(2, 2), (3, 3), (3, 5), (4, 4), (5, 6), (6, 6)])
def test_critical_count_equals_brute_force(n: int, m: int) -> None:
    cdf = brute_cdf(n, m)
    want = max((u for u, p in enumerate(cdf) if p <= 0.025 + 1e-12), default=-1)
    assert critical_count(n, m) == want


def test_critical_counts_match_the_published_table() -> None:
    # Two-sided 5% critical values of U (Mann-Whitney tables): reject when U <= value.
    table = {(4, 4): 0, (5, 5): 2, (6, 6): 5, (8, 8): 13, (10, 10): 23, (20, 20): 127}
    for (n, m), value in table.items():
        assert critical_count(n, m) == value, (n, m)


def test_normal_approximation_continues_the_exact_counts() -> None:
    # 50 x 50 is counted exactly; 51 x 51 uses the approximation: they agree to one count
    # at the boundary (the approximation is a continuity-corrected normal quantile).
    assert 50 * 50 <= EXACT_LIMIT < 51 * 51
    z = 1.959963984540054
    approx_50 = math.floor(1250 - z * math.sqrt(2500 * 101 / 12) - 0.5)
    assert abs(critical_count(50, 50) - approx_50) <= 1


def reference(base: list[float], new: list[float]) -> tuple[float, float, float]:
    """Median of the pairwise log ratios and the k-th smallest/largest, by plain loops."""
    d = sorted(math.log(y) - math.log(x) for x in base for y in new)
    mid = len(d) // 2
    med = d[mid] if len(d) % 2 else (d[mid - 1] + d[mid]) / 2
    c = critical_count(len(base), len(new))
    return med, d[c], d[len(d) - 1 - c]


values = st.lists(st.floats(min_value=1.0, max_value=1e6, allow_nan=False), min_size=4, max_size=12)


@given(values, values)
@settings(max_examples=60)
def test_estimate_and_interval_equal_the_reference(base: list[float], new: list[float]) -> None:
    s = shift(base, new)
    assert s is not None and s.scale == "log"
    med, lo, hi = reference(base, new)
    assert s.estimate == pytest.approx(med, abs=1e-12)
    assert (s.low, s.high) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    assert s.low <= s.estimate <= s.high
    assert s.change_pct == pytest.approx(100 * math.expm1(med))


def test_a_pure_ratio_is_recovered_exactly_and_is_beyond_the_noise() -> None:
    base = [10.0, 10.2, 9.9, 10.1, 30.0, 9.8]  # one slow step among them
    s = shift(base, [1.3 * x for x in base])
    assert s is not None and s.change_pct == pytest.approx(30.0)
    assert s.beyond_noise and s.low_pct < 30.0 < s.high_pct
    assert (s.n_base, s.n_new, s.base_median) == (6, 6, 10.05)  # the sample's own median
    wide = shift([10.0, 11.0, 12.5, 9.0, 30.0, 10.5], [13.0, 14.3, 16.25, 11.7, 39.0, 13.65])
    assert wide is not None and not wide.beyond_noise  # 6 steps spread by 20%: 30% is noise


def test_identical_samples_give_no_change_and_no_noise() -> None:
    s = shift([5, 5, 5, 5], [5, 5, 5, 5])
    assert s is not None and (s.change_pct, s.low_pct, s.high_pct, s.beyond_noise) == (0.0, 0.0, 0.0, False)


def test_too_few_steps() -> None:
    assert shift([1.0], [1.0, 2.0]) is None
    s = shift([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])  # 3 vs 3: the smallest tail is 1/20
    assert s is not None and s.low is None and not s.beyond_noise and s.change_pct == pytest.approx(100.0)


def test_zeros_use_differences_and_never_go_below_minus_100_percent() -> None:
    s = shift([100.0, 120.0, 80.0, 110.0, 90.0], [0.0, 0.0, 0.0, 0.0, 0.0])
    assert s is not None and s.scale == "value"
    assert s.change_pct == pytest.approx(-100.0) and s.low_pct == -100.0 and s.beyond_noise
    assert s.delta == pytest.approx(-100.0)


def test_coverage_of_the_interval_on_noise() -> None:
    """Samples of one distribution: the 95% interval holds no change in about 95% of draws."""
    rng = np.random.default_rng(7)
    hits = sum(
        not shift(rng.lognormal(0, 0.2, 12), rng.lognormal(0, 0.2, 12)).beyond_noise  # type: ignore[union-attr]
        for _ in range(400)
    )
    assert 0.92 <= hits / 400 <= 0.99
