"""Whether a rank stands out as the one that makes the others wait, or the wait is noise.

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

Among the ranks passing both, the one that caused the most wait is named.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nsys_llm_explainer.fleet import robust

LEVEL = 0.01


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
         caused: np.ndarray, k: float = robust.K) -> dict[str, Any]:
    """Per rank: last arrivals, charged collectives it took part in, the sum of 1/m over them
    and the wait it caused -> the fleet.json `collectives.blame` object."""
    nr = len(last_count)
    rank_level = LEVEL / nr if nr else LEVEL
    p = np.where(charged_in > 0, chance_sum / np.maximum(charged_in, 1), 0.0)
    pvals = np.array([binom_sf(int(c), int(n), float(q)) for c, n, q in zip(last_count, charged_in, p, strict=True)])
    band = robust.band(caused.astype(np.float64), k)[2] if nr >= robust.MIN_RANKS else None
    beyond = caused > band if band is not None else np.ones(nr, dtype=bool)
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
        "wait_band_ns": None if band is None else int(round(band)),
        "stands_out": bool(passing[r]),
    }
