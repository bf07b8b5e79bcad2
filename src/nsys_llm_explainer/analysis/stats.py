"""Percentiles per group in one sort (never one query or one Python loop per group).

Definition (documented in docs/metrics.md): linear interpolation between closest ranks,
as numpy.percentile's default, rounded half to even to integer nanoseconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_KEY_LIMIT = 1 << 62  # group * span + value must stay inside int64


def _sorted_within_groups(values: np.ndarray, groups: np.ndarray, ngroups: int) -> np.ndarray:
    """`values` ordered by (group, value), as values only."""
    if ngroups <= 1:
        return np.sort(values)
    if not np.issubdtype(values.dtype, np.integer):
        return values[np.lexsort((values, groups))]
    lo, hi = int(values.min()), int(values.max())
    span = hi - lo + 1
    if span * ngroups < _KEY_LIMIT:
        # One int64 sort of a combined key is several times cheaper than a two-key lexsort
        # followed by a gather; the value is recovered from the key exactly.
        key = groups.astype(np.int64) * span + (values.astype(np.int64) - lo)
        key.sort()
        return key % span + lo
    return values[np.lexsort((values, groups))]


def _interpolate(
    pick: np.ndarray, counts: np.ndarray, offsets: np.ndarray, ps: Sequence[float]
) -> dict[float, np.ndarray]:
    """Per-group percentiles from `pick(positions)`, the sorted values at those positions."""
    out = {p: np.zeros(len(counts), dtype=np.int64) for p in ps}
    has = counts > 0
    for p in ps:
        pos = (p / 100.0) * (counts[has] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.ceil(pos).astype(np.int64)
        frac = pos - lo
        base = offsets[has]
        vlo = pick[base + lo].astype(np.float64)
        vhi = pick[base + hi].astype(np.float64)
        out[p][has] = np.rint(vlo + (vhi - vlo) * frac).astype(np.int64)
    return out


def group_percentiles(
    values: np.ndarray, groups: np.ndarray, ngroups: int, ps: Sequence[float]
) -> dict[float, np.ndarray]:
    """Percentiles of `values` within each group code 0..ngroups-1 (empty groups -> 0)."""
    if len(values) == 0:
        return {p: np.zeros(ngroups, dtype=np.int64) for p in ps}
    if ngroups == 1:  # a partial sort around the needed ranks is enough
        one = percentiles(values, ps)
        return {p: np.array([one[p]], dtype=np.int64) for p in ps}
    v = _sorted_within_groups(values, groups, ngroups)
    counts = np.bincount(groups, minlength=ngroups) if ngroups > 1 else np.array([len(values)])
    offsets = np.r_[0, np.cumsum(counts)[:-1]]
    return _interpolate(v, counts, offsets, ps)


def percentiles(values: np.ndarray, ps: Sequence[float]) -> dict[float, int]:
    """Percentiles of one group: a partial sort around the needed ranks (O(n))."""
    n = len(values)
    if n == 0:
        return {p: 0 for p in ps}
    ranks: set[int] = set()
    for p in ps:
        pos = (p / 100.0) * (n - 1)
        ranks.update((int(np.floor(pos)), int(np.ceil(pos))))
    part = np.partition(values, sorted(ranks))
    res = _interpolate(part, np.array([n]), np.array([0]), ps)
    return {p: int(res[p][0]) for p in ps}
