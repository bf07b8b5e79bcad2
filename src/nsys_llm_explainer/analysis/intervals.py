"""Interval unions and gaps by sort-and-sweep (O(n log n), no Python loop over rows)."""

from __future__ import annotations

import numpy as np


def merge(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted intervals covering exactly the union of [start, end)."""
    if len(start) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if bool((start[1:] >= start[:-1]).all()):  # exports are mostly written in time order
        s, e = start, np.maximum.accumulate(end)
    else:
        # Tie order among equal starts does not change the union: no stable sort needed.
        order = np.argsort(start)
        s = start[order]
        e = np.maximum.accumulate(end[order])
    # A new merged interval begins where a start lies beyond everything before it.
    begins = np.flatnonzero(np.r_[True, s[1:] > e[:-1]])
    ends = np.r_[begins[1:] - 1, len(s) - 1]
    return s[begins], e[ends]


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    ms, me = merge(start, end)
    return int((me - ms).sum())


def gaps(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The idle gaps between merged intervals (inside the window first start..last end)."""
    ms, me = merge(start, end)
    return me[:-1], ms[1:]


def overlap_with_union(
    qs: np.ndarray, qe: np.ndarray, us: np.ndarray, ue: np.ndarray
) -> np.ndarray:
    """For each query interval, the length covered by the disjoint sorted intervals us/ue."""
    if len(qs) == 0 or len(us) == 0:
        return np.zeros(len(qs), dtype=np.int64)
    lengths = ue - us
    cum = np.r_[0, np.cumsum(lengths)]

    def covered_before(t: np.ndarray) -> np.ndarray:
        # Length of the union that lies before time t.
        i = np.searchsorted(us, t, side="right")  # intervals starting at or before t
        full = cum[np.maximum(i - 1, 0)]
        last = np.maximum(i - 1, 0)
        partial = np.clip(t - us[last], 0, lengths[last])
        return np.where(i > 0, full + partial, 0)

    return covered_before(qe) - covered_before(qs)
