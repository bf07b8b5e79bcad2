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


def close_gaps(start: np.ndarray, end: np.ndarray, tolerance: int) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint sorted intervals (as merge() returns them) with every hole of at most
    `tolerance` between neighbours filled in."""
    if len(start) < 2:
        return start, end
    begins = np.flatnonzero(np.r_[True, start[1:] - end[:-1] > tolerance])
    ends = np.r_[begins[1:] - 1, len(start) - 1]
    return start[begins], end[ends]


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


def _layered(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray, want: int
) -> tuple[np.ndarray, np.ndarray]:
    """Segments where the coverage code (1 inside A, + 2 inside B) equals `want`.

    A and B must each be disjoint and sorted (as merge() returns them). One sort of all
    boundaries: a stable sort of four sorted runs, which is a merge. The order of
    boundaries at equal times does not matter: the segments between them are empty and
    dropped, and every later segment sees the coverage after all of them.
    """
    if len(a_start) == 0 or (want == 3 and len(b_start) == 0):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if len(b_start) == 0:
        return (a_start.copy(), a_end.copy()) if want == 1 else (np.empty(0, np.int64),) * 2
    t = np.concatenate((a_start, a_end, b_start, b_end)).astype(np.int64)
    delta = np.concatenate(
        (np.full(len(a_start), 1), np.full(len(a_end), -1), np.full(len(b_start), 2), np.full(len(b_end), -2))
    ).astype(np.int64)
    order = np.argsort(t, kind="stable")
    t, code = t[order], np.cumsum(delta[order])
    seg_start, seg_end, seg_code = t[:-1], t[1:], code[:-1]
    keep = (seg_code == want) & (seg_end > seg_start)
    s, e = seg_start[keep], seg_end[keep]
    if len(s) < 2:
        return s, e
    # Adjacent pieces split only by a boundary of the other set: join them again.
    joins = np.flatnonzero(s[1:] != e[:-1])
    starts = np.r_[0, joins + 1]
    ends = np.r_[joins, len(s) - 1]
    return s[starts], e[ends]


def intersect(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A ∩ B for disjoint sorted interval sets, as a disjoint sorted set."""
    return _layered(a_start, a_end, b_start, b_end, 3)


def subtract(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A minus B for disjoint sorted interval sets, as a disjoint sorted set."""
    return _layered(a_start, a_end, b_start, b_end, 1)
