"""Percentiles per group in one sort (never one query or one Python loop per group).

Definition (documented in docs/metrics.md): linear interpolation between closest ranks,
as numpy.percentile's default, rounded half to even to integer nanoseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def group_percentiles(
    values: np.ndarray, groups: np.ndarray, ngroups: int, ps: Sequence[float]
) -> dict[float, np.ndarray]:
    """Percentiles of `values` within each group code 0..ngroups-1 (empty groups -> 0)."""
    out = {p: np.zeros(ngroups, dtype=np.int64) for p in ps}
    if len(values) == 0:
        return out
    order = np.lexsort((values, groups))
    v = values[order].astype(np.float64)
    counts = np.bincount(groups, minlength=ngroups)
    offsets = np.r_[0, np.cumsum(counts)[:-1]]
    has = counts > 0
    for p in ps:
        pos = (p / 100.0) * (counts[has] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        frac = pos - lo
        base = offsets[has]
        val = v[base + lo] + (v[base + hi] - v[base + lo]) * frac
        out[p][has] = np.rint(val).astype(np.int64)
    return out


def percentiles(values: np.ndarray, ps: Sequence[float]) -> dict[float, int]:
    if len(values) == 0:
        return {p: 0 for p in ps}
    res = group_percentiles(values, np.zeros(len(values), dtype=np.int64), 1, ps)
    return {p: int(res[p][0]) for p in ps}
