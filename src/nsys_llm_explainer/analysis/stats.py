"""Percentiles per group in one sort (never one query or one Python loop per group).

Definition (docs/metrics/top_kernels.md): nearest rank. The p-th percentile of n sorted
values d[0..n-1] is d[k-1] with k = ceil(p/100 * n), at least 1: the smallest value with at
least p% of the values at or below it. It is always a value that occurred (an interpolated
p50 of a kernel that alternates 7.9 ms and 0.16 ms calls would be a duration no call had).
k is computed in exact integer arithmetic, so p=90 of 10 values is d[8], never d[9].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from nsys_llm_explainer.analysis.groups import PACK_LIMIT


def rank_of(p: float, counts: np.ndarray) -> np.ndarray:
    """1-based nearest rank ceil(p/100 * n) per count n (at least 1), exactly."""
    frac = Fraction(str(p)) / 100  # str: 99.9 is 999/10, not its binary neighbour
    num, den = frac.numerator, frac.denominator
    counts = np.asarray(counts, dtype=np.int64)
    k = (counts * num + den - 1) // den
    return np.clip(k, 1, np.maximum(counts, 1))


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


def _nearest_rank(
    pick: Callable[[np.ndarray], np.ndarray], counts: np.ndarray, offsets: np.ndarray,
    ps: Sequence[float],
) -> dict[float, np.ndarray]:
    """Per-group percentiles from `pick(positions)`, the sorted values at those positions."""
    out = {p: np.zeros(len(counts), dtype=np.int64) for p in ps}
    has = counts > 0
    for p in ps:
        k = rank_of(p, counts[has])
        out[p][has] = pick(offsets[has] + k - 1).astype(np.int64)
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
    return _nearest_rank(pick, counts, offsets, ps), top


def percentiles(values: np.ndarray, ps: Sequence[float]) -> dict[float, int]:
    """Percentiles of one group: a partial sort around the needed ranks (O(n))."""
    n = len(values)
    if n == 0:
        return {p: 0 for p in ps}
    idx = {p: int(rank_of(p, np.array([n]))[0]) - 1 for p in ps}
    part = np.partition(values, sorted(set(idx.values())))
    return {p: int(part[i]) for p, i in idx.items()}


@dataclass(frozen=True)
class SortedGroups:
    """Values sorted by (group, value): group i's values are values[offsets[i]:][:counts[i]].

    For metrics that need more than percentiles from the one sort (modes.py)."""

    values: np.ndarray
    counts: np.ndarray
    offsets: np.ndarray

    def percentiles(self, ps: Sequence[float]) -> dict[float, np.ndarray]:
        return _nearest_rank(self.values.__getitem__, self.counts, self.offsets, ps)


def sort_within_groups(values: np.ndarray, groups: np.ndarray, ngroups: int) -> SortedGroups:
    counts = np.bincount(groups, minlength=ngroups).astype(np.int64)
    offsets = np.cumsum(counts) - counts
    if len(values) == 0:
        return SortedGroups(values.astype(np.int64), counts, offsets)
    if ngroups <= 1:
        return SortedGroups(np.sort(values), counts, offsets)
    if np.issubdtype(values.dtype, np.integer):
        lo, hi = int(values.min()), int(values.max())
        span = hi - lo + 1
        if span * ngroups < PACK_LIMIT:
            key = groups.astype(np.int64, copy=False) * span
            key += values.astype(np.int64, copy=False)
            key.sort()
            # Sorted keys are grouped, so each key's group is known from the counts: one
            # multiply-subtract recovers the values (several times cheaper than a modulo).
            key -= np.repeat(np.arange(ngroups, dtype=np.int64) * span, counts)
            return SortedGroups(key, counts, offsets)
    return SortedGroups(values[np.lexsort((values, groups))], counts, offsets)
