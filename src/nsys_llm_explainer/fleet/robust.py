"""The robust band used to call a value an outlier among ranks or collectives.

band = median + K x MAD_SCALE x MAD. MAD_SCALE makes the MAD estimate the standard
deviation of normally distributed values, so K = 3 is the familiar 3-sigma line: a rank
that only differs by noise crosses it about once in 740 draws (0.13%), i.e. fewer than one
false straggler in ten 64-rank jobs, while one outlier cannot inflate the band the way it
inflates a standard deviation. A floor of MIN_EXCESS_PCT above the median keeps identical
ranks (MAD close to 0) from being flagged for differences nobody could act on. It takes at
least MIN_RANKS values: with two, both sit exactly one MAD from their median.

Whether a rank stands out as the one that makes the others wait, or the wait is noise.

Some rank arrives last at every collective that is not a tie, even when all ranks are alike,
so the rank with the most wait caused is only named when both tests say it stands out:

1. Last arrivals against chance. If no rank stands out, the last arrival at a collective with
   m ranks present is any of them with probability 1/m, so rank r's count of last arrivals over
   the n_r charged collectives it took part in is Binomial(n_r, p_r), p_r = the mean of 1/m
   over them (when m varies, the true count is less spread than that binomial, so the test
   is conservative). The one-sided p-value P(X >= count) must be at most LEVEL / ranks:
   the rank is picked after looking at all of them (Bonferroni), so a run of identical ranks
   has a rank named in at most LEVEL = 1% of runs. The test takes collectives as independent
   draws; a rank that is late for several collectives in a row for one reason makes them less
   so, which the strict level and the second test absorb.
2. Wait caused beyond the robust band (robust.py: median + K x 1.4826 x MAD, and at least 2%
   above the median) of the ranks' wait caused, with at least robust.MIN_RANKS ranks (with two,
   both sit one MAD from their median, and only the first test applies).

Among the ranks passing both, the one that caused the most wait is named."""

from __future__ import annotations

import math
from typing import TypedDict

import numpy as np

K = 3.0
MAD_SCALE = 1.4826
MIN_EXCESS_PCT = 2.0
MIN_RANKS = 3


def band(values: np.ndarray, k: float = K) -> tuple[float, float, float]:
    """(median, MAD, upper limit) of `values`."""
    v = np.asarray(values, dtype=np.float64)
    med = float(np.median(v))
    mad = float(np.median(np.abs(v - med)))
    upper = max(med + k * MAD_SCALE * mad, med * (1.0 + MIN_EXCESS_PCT / 100.0))
    return med, mad, upper


def above(values: np.ndarray, k: float = K) -> np.ndarray:
    """Boolean mask of the values beyond the upper band."""
    _, _, upper = band(values, k)
    return np.asarray(values, dtype=np.float64) > upper


LEVEL = 0.01


class Blame(TypedDict):
    """fleet.json run `collectives.blame`: the rank that caused the most wait, and the tests."""
    level: float
    rank_level: float
    rank: int
    arrived_last: int
    charged: int
    chance_pct: float
    p_value: float
    wait_caused_ns: int
    wait_band_ns: int | None
    stands_out: bool


def binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed in log space (exact up to rounding)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    j = np.arange(k, n, dtype=np.float64)
    first = (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
             + k * math.log(p) + (n - k) * math.log1p(-p))
    steps = np.log((n - j) / (j + 1)) + math.log(p) - math.log1p(-p)
    logs = np.r_[first, first + np.cumsum(steps)]
    top = float(logs.max())
    return min(1.0, math.exp(top) * float(np.exp(logs - top).sum()))


def judge(last_count: np.ndarray, charged_in: np.ndarray, chance_sum: np.ndarray,
         caused: np.ndarray, k: float = K) -> Blame:
    """Per rank: last arrivals, charged collectives it took part in, the sum of 1/m over them
    and the wait it caused -> the fleet.json `collectives.blame` object."""
    nr = len(last_count)
    rank_level = LEVEL / nr if nr else LEVEL
    p = np.where(charged_in > 0, chance_sum / np.maximum(charged_in, 1), 0.0)
    pvals = np.array([binom_sf(int(c), int(n), float(q)) for c, n, q in zip(last_count, charged_in, p, strict=True)])
    upper = band(caused.astype(np.float64), k)[2] if nr >= MIN_RANKS else None
    beyond = caused > upper if upper is not None else np.ones(nr, dtype=bool)
    passing = (pvals <= rank_level) & beyond & (caused > 0)
    if passing.any():
        r = int(np.flatnonzero(passing)[np.argmax(caused[passing])])
    else:
        r = int(np.argmax(caused))
    return {
        "level": LEVEL,
        "rank_level": rank_level,
        "rank": r,
        "arrived_last": int(last_count[r]),
        "charged": int(charged_in[r]),
        "chance_pct": round(100.0 * float(p[r]), 2),
        "p_value": float(f"{pvals[r]:.3g}"),
        "wait_caused_ns": int(caused[r]),
        "wait_band_ns": None if upper is None else int(round(upper)),
        "stands_out": bool(passing[r]),
    }
