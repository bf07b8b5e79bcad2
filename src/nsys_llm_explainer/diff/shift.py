"""How much a per-step figure changed, with a confidence interval: the Hodges-Lehmann shift.

Captures hold few steps (often 6 to 30), and step times are skewed by the odd slow step, so
a change is estimated without assuming a distribution:

- On logarithms (every value > 0): the estimate is the median of all n x m differences
  log(new_j) - log(base_i); exp() of it is the ratio new / base, reported as a percent change.
  A multiplicative change (every GEMM 30% slower) is a pure shift on this scale, whatever
  mix of step kinds (prefill, decode) both captures hold.
- On the values themselves (some value is 0, e.g. a kernel absent from some steps): the
  median of the differences new_j - base_i, reported against the base median (a percentage
  at or above -100%: the values are times and counts, never negative).

The interval is the distribution-free one that goes with the estimate (Lehmann 1963;
Hollander & Wolfe, Nonparametric Statistical Methods, ch. 4): the k-th smallest and k-th
largest of the sorted differences, where k - 1 is the largest count c with
P(U <= c) <= (1 - level) / 2 for the Mann-Whitney count U of two samples of sizes n, m.
P is exact (counted by dynamic programming) for n x m <= EXACT_LIMIT and from the normal
approximation with continuity correction beyond. When no count is small enough (n = m = 3:
the smallest tail is 1/20), no interval at `level` exists and the change is never called
beyond the noise. "Beyond the noise" means the interval excludes no change.

Medians are the sample's own median (numpy.median: the mean of the two middle values of an
even count), always shown with the sample size.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
EXACT_LIMIT = 2_500  # n x m up to which the Mann-Whitney distribution is counted exactly
MIN_SAMPLES = 2


@dataclass(frozen=True)
class Shift:
    """The change from `base` to `new` samples. Percentages are of the base (ratio - 1 on the
    log scale; shift / base median on the value scale); None where it cannot be said."""

    scale: str  # "log" or "value"
    n_base: int
    n_new: int
    base_median: float
    new_median: float
    estimate: float  # log ratio ("log") or difference in the values' unit ("value")
    low: float | None  # interval bounds on the same scale; None: no interval at `level`
    high: float | None
    level: float

    @property
    def change_pct(self) -> float | None:
        return self._pct(self.estimate)

    @property
    def low_pct(self) -> float | None:
        return None if self.low is None else self._pct(self.low)

    @property
    def high_pct(self) -> float | None:
        return None if self.high is None else self._pct(self.high)

    @property
    def beyond_noise(self) -> bool:
        """The interval excludes zero (no change)."""
        if self.low is None or self.high is None:
            return False
        return self.low > 0 or self.high < 0

    @property
    def delta(self) -> float:
        """The change in the values' unit, at the base median (new - base, per sample)."""
        if self.scale == "log":
            return self.base_median * math.expm1(self.estimate)
        return self.estimate

    def _pct(self, x: float) -> float | None:
        if self.scale == "log":
            return 100.0 * math.expm1(x)
        if self.base_median <= 0:
            return None
        # the values are times and counts (never below 0): no change is below -100%
        return max(100.0 * x / self.base_median, -100.0)


def _tail_counts(n: int, m: int) -> np.ndarray:
    """Cumulative P(U <= u), u = 0 .. n*m, of the Mann-Whitney count for sizes n, m.

    The number of orderings with count u is the coefficient of q^u in the Gaussian binomial
    [n+m choose n]_q: F(i, j) = q^j F(i-1, j) + F(i, j-1), F(i, 0) = F(0, j) = 1."""
    return _tail_counts_cached(min(n, m), max(n, m))


@functools.lru_cache(maxsize=64)
def _tail_counts_cached(n: int, m: int) -> np.ndarray:
    size = n * m + 1
    prev = [np.zeros(size) for _ in range(m + 1)]  # F(0, j) = 1
    for j in range(m + 1):
        prev[j][0] = 1.0
    for _ in range(1, n + 1):
        cur = [np.zeros(size) for _ in range(m + 1)]
        cur[0][0] = 1.0  # F(i, 0) = 1
        for j in range(1, m + 1):
            # the largest value is a base one (it exceeds all j new ones: U grows by j) or a new one
            cur[j][j:] += prev[j][: size - j]
            cur[j] += cur[j - 1]
        prev = cur
    counts = prev[m]
    return np.cumsum(counts) / counts.sum()


def critical_count(n: int, m: int, level: float = LEVEL) -> int:
    """The largest c with P(U <= c) <= (1 - level) / 2, or -1 when none is (too few samples)."""
    alpha = (1.0 - level) / 2.0
    if n * m <= EXACT_LIMIT:
        cdf = _tail_counts(n, m)
        ok = np.flatnonzero(cdf <= alpha + 1e-12)
        return int(ok[-1]) if len(ok) else -1
    z = _normal_quantile(1.0 - alpha)
    mean = n * m / 2.0
    sd = math.sqrt(n * m * (n + m + 1) / 12.0)
    return max(int(math.floor(mean - z * sd - 0.5)), -1)


def _normal_quantile(p: float) -> float:
    """Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9
    after one Newton step on math.erf)."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00)
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    elif p <= 1 - lo:
        q = p - 0.5
        r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (
            ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    else:
        q = math.sqrt(-2 * math.log(1 - p))
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    err = 0.5 * math.erfc(-x / math.sqrt(2)) - p
    return x - err * math.sqrt(2 * math.pi) * math.exp(x * x / 2)


def shift(base: np.ndarray | list[float], new: np.ndarray | list[float],
          level: float = LEVEL) -> Shift | None:
    """The Hodges-Lehmann change from `base` to `new`, or None with fewer than MIN_SAMPLES
    values on a side (NaN values are dropped)."""
    b = np.asarray(base, dtype=np.float64)
    n_ = np.asarray(new, dtype=np.float64)
    b, n_ = b[np.isfinite(b)], n_[np.isfinite(n_)]
    if len(b) < MIN_SAMPLES or len(n_) < MIN_SAMPLES:
        return None
    log = bool((b > 0).all() and (n_ > 0).all())
    x, y = (np.log(b), np.log(n_)) if log else (b, n_)
    diffs = np.sort((y[None, :] - x[:, None]).ravel())
    est = float(np.median(diffs))
    c = critical_count(len(b), len(n_), level)
    lo = hi = None
    if c >= 0:
        lo, hi = float(diffs[c]), float(diffs[len(diffs) - 1 - c])
    return Shift("log" if log else "value", len(b), len(n_), float(np.median(b)),
                 float(np.median(n_)), est, lo, hi, level)
