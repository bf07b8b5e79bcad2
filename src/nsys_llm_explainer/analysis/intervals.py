"""Interval unions and gaps by sort-and-sweep (O(n log n), no Python loop over rows).

Greedy non-overlapping windows: of the windows [pos, pos + length) of each group, keep
the first, then the next one that starts at or after the kept one's end, and so on (left to
right). That is the most windows that can be kept without any two sharing a position, and
it is what a reader counts by hand ("A A A A" holds "A A" twice, not three times).

Vectorized with pointer doubling: next[i] is the first window of i's group starting at or
after i's end; the kept windows are the path first -> next -> next ... of each group, found
in O(n log n) without a Python loop per window (a run of a million identical kernels is
one path of 500,000 windows)."""

from __future__ import annotations

import itertools

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


_MIN, _MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def _join_touching(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint pieces with those that touch (one ends where the next starts) joined."""
    if len(s) < 2:
        return s, e
    joins = np.flatnonzero(s[1:] != e[:-1])
    return s[np.r_[0, joins + 1]], e[np.r_[joins, len(s) - 1]]


def intersect(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A ∩ B for disjoint sorted interval sets (as merge() returns them), as a disjoint sorted
    set of non-empty intervals, touching pieces joined.

    The B intervals that overlap one A interval are a contiguous run (both sets are sorted),
    found by two binary searches; each overlapping pair gives one piece. No sort, and
    memory in the number of pieces, at most len(A) + len(B)."""
    if len(a_start) == 0 or len(b_start) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    lo = np.searchsorted(b_end, a_start, side="right")  # first B ending after A starts
    hi = np.searchsorted(b_start, a_end, side="left")  # B intervals starting before A ends
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    i = np.repeat(np.arange(len(a_start)), counts)
    # j runs lo[i], lo[i] + 1, ... within each A interval's run of pieces.
    j = np.arange(total) + np.repeat(lo - (np.cumsum(counts) - counts), counts)
    s = np.maximum(a_start[i], b_start[j])
    e = np.minimum(a_end[i], b_end[j])
    del i, j
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    return _join_touching(s.astype(np.int64, copy=False), e.astype(np.int64, copy=False))


def subtract(
    a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A minus B for disjoint sorted interval sets: A ∩ (the complement of B), as a disjoint
    sorted set of non-empty intervals (A unchanged when B is empty)."""
    if len(a_start) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if len(b_start) == 0:
        return a_start.copy(), a_end.copy()
    cs = np.concatenate(([_MIN], b_end)).astype(np.int64, copy=False)
    ce = np.concatenate((b_start, [_MAX])).astype(np.int64, copy=False)
    open_ = ce > cs
    if not open_.all():
        cs, ce = cs[open_], ce[open_]
    return intersect(a_start, a_end, cs, ce)


# Rows of one grouped_union pass: the sweep's temporaries (several row-sized arrays) are made a
# part at a time, each part whole groups, so they stay at a part's size at millions of rows.
UNION_PART_ROWS = 1 << 20


def grouped_union(group: np.ndarray, start: np.ndarray, end: np.ndarray, ngroups: int) -> np.ndarray:
    """Per group: the length of the union of its intervals [start, end)."""
    if len(group) == 0:
        return np.zeros(ngroups, dtype=np.int64)
    if len(start) < 2 or bool((start[1:] >= start[:-1]).all()):
        order = np.argsort(group, kind="stable")  # rows in time order already: group them only
    else:
        order = np.lexsort((start, group))
    g = group[order]
    n = len(g)
    # parts of about UNION_PART_ROWS rows, each cut where a group begins (a group larger than
    # a part is a part alone)
    cuts = np.unique(np.searchsorted(g, g[np.arange(UNION_PART_ROWS, n, UNION_PART_ROWS)], side="left"))
    bounds = [0, *(int(c) for c in cuts if 0 < c < n), n]
    if len(bounds) == 2:  # one part: the order is not needed past its two gathers
        s, e = start[order], end[order]
        del order
        return _union_lengths(g, s, e, ngroups).astype(np.int64)
    total = np.zeros(ngroups, dtype=np.float64)
    for a, b in itertools.pairwise(bounds):  # strictly increasing: the cuts are distinct and inside
        total += _union_lengths(g[a:b], start[order[a:b]], end[order[a:b]], ngroups)
    return total.astype(np.int64)


def _union_lengths(g: np.ndarray, start: np.ndarray, end: np.ndarray, ngroups: int) -> np.ndarray:
    """grouped_union over rows sorted by group, then start (`start`, `end`: new arrays, changed
    here), as float64 sums per group."""
    # (int64 already: astype would copy each row-sized column a second time)
    s, e = start.astype(np.int64, copy=False), end.astype(np.int64, copy=False)
    lo = int(min(s.min(), e.min()))
    span = int(max(s.max(), e.max())) - lo + 1
    # Groups laid end to end on one axis (group * span): a running maximum never crosses
    # from one group into the next, so one sweep merges every group at once. Built in
    # place: one row-sized temporary, not three.
    off = g.astype(np.int64, copy=True)
    off *= span
    off -= lo
    s += off
    e += off
    del off
    np.maximum.accumulate(e, out=e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], e[:-1], out=new[1:])
    begins = np.flatnonzero(new)
    del new
    ends = np.empty_like(begins)
    ends[:-1] = begins[1:] - 1
    ends[-1] = len(s) - 1
    lengths = e[ends]
    del e, ends
    lengths -= s[begins]
    del s
    return np.bincount(g[begins], weights=lengths, minlength=ngroups)


def non_overlapping(pos: np.ndarray, group: np.ndarray, length: int) -> np.ndarray:
    """Boolean mask of the windows kept by the left-to-right greedy, per group.

    `pos` and `group` are per window (any order); every window is `length` positions long.
    """
    n = len(pos)
    keep = np.zeros(n, dtype=bool)
    if n == 0:
        return keep
    # Any integer dtype: positions and groups are only compared here, and _greedy_paths
    # widens what it computes with.
    order = np.lexsort((pos, group))
    p, g = pos[order], group[order]
    # A window that starts at or after the previous window of its group ends is always kept
    # (whatever was kept before ended by then), so only runs of windows that each overlap
    # the one before ("clusters") need the path search; usually that is few of them.
    close = np.zeros(n, dtype=bool)
    close[1:] = (g[1:] == g[:-1]) & (p[1:] - p[:-1] < length)
    busy = close.copy()
    busy[:-1] |= close[1:]
    kept_sorted = ~busy
    if busy.any():
        cluster = np.cumsum(~close)[busy]
        kept_sorted[busy] = _greedy_paths(p[busy], cluster, length)
    keep[order] = kept_sorted
    return keep


def _greedy_paths(p: np.ndarray, g: np.ndarray, length: int) -> np.ndarray:
    """The greedy for windows sorted by (group, position), by pointer doubling."""
    n = len(p)
    lo = int(p.min())
    span = int(p.max()) - lo + length + 1
    # One sorted key per window; windows of a group are contiguous and in position order.
    key = (g.astype(np.int64) - int(g.min())) * span + (p.astype(np.int64) - lo)
    nxt = np.searchsorted(key, key + length, side="left")
    inside = nxt < n
    inside[inside] = g[nxt[inside]] == g[inside]
    jump = np.append(np.where(inside, nxt, n), n)  # n: past the group's last window
    first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    kept = np.zeros(n + 1, dtype=bool)
    reached = first
    # After step k, `reached` holds the path's first 2^k windows of every group.
    while True:
        kept[reached] = True
        ahead = jump[reached]
        ahead = ahead[ahead < n]
        if len(ahead) == 0:
            break
        reached = np.concatenate([reached, ahead])
        jump = jump[jump]
    return kept[:n]
