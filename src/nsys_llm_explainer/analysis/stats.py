"""Percentiles per group in one sort (never one query or one Python loop per group).

Definition (documented in docs/metrics.md): linear interpolation between closest ranks,
as numpy.percentile's default, rounded half to even to integer nanoseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nsys_llm_explainer.analysis.groups import PACK_LIMIT


def _sorted_within_groups(
    values: np.ndarray, groups: np.ndarray, ngroups: int
) -> Callable[[np.ndarray], np.ndarray]:
    """A picker: positions -> the values at those positions of `values` ordered by
    (group, value)."""
    if ngroups <= 1:
        return np.sort(values).__getitem__
    if not np.issubdtype(values.dtype, np.integer):
        return values[np.lexsort((values, groups))].__getitem__
    lo, hi = int(values.min()), int(values.max())
    span = hi - lo + 1
    if span * ngroups < PACK_LIMIT:
        # One int64 sort of a combined key is several times cheaper than a two-key lexsort
        # followed by a gather; a value is recovered from its key exactly, and only the
        # values at the picked positions are.
        key = groups.astype(np.int64, copy=False) * span
        key += values.astype(np.int64, copy=False)
        key -= lo
        key.sort()
        return lambda pos: key[pos] % span + lo
    return values[np.lexsort((values, groups))].__getitem__


def _interpolate(
    pick: Callable[[np.ndarray], np.ndarray], counts: np.ndarray, offsets: np.ndarray,
    ps: Sequence[float],
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
        vlo = pick(base + lo).astype(np.float64)
        vhi = pick(base + hi).astype(np.float64)
        # numpy's lerp: from the nearer end, so a result of exactly .5 rounds as numpy's.
        diff = vhi - vlo
        value = np.where(frac >= 0.5, vhi - diff * (1.0 - frac), vlo + diff * frac)
        out[p][has] = np.rint(value).astype(np.int64)
    return out


def group_percentiles(
    values: np.ndarray, groups: np.ndarray, ngroups: int, ps: Sequence[float]
) -> dict[float, np.ndarray]:
    """Percentiles of `values` within each group code 0..ngroups-1 (empty groups -> 0)."""
    return group_summary(values, groups, ngroups, ps)[0]


def group_summary(
    values: np.ndarray, groups: np.ndarray, ngroups: int, ps: Sequence[float]
) -> tuple[dict[float, np.ndarray], np.ndarray]:
    """Percentiles and the maximum of `values` within each group code (empty groups: 0),
    from one sort."""
    if len(values) == 0:
        return {p: np.zeros(ngroups, dtype=np.int64) for p in ps}, np.zeros(ngroups, np.int64)
    if ngroups == 1:  # a partial sort around the needed ranks is enough
        one = percentiles(values, ps)
        return {p: np.array([one[p]], dtype=np.int64) for p in ps}, np.array([values.max()])
    pick = _sorted_within_groups(values, groups, ngroups)
    counts = np.bincount(groups, minlength=ngroups)
    ends = np.cumsum(counts)
    offsets = np.r_[0, ends[:-1]]
    top = np.zeros(ngroups, dtype=values.dtype)
    has = counts > 0
    top[has] = pick(ends[has] - 1)
    return _interpolate(pick, counts, offsets, ps), top


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
    res = _interpolate(part.__getitem__, np.array([n]), np.array([0]), ps)
    return {p: int(res[p][0]) for p in ps}
