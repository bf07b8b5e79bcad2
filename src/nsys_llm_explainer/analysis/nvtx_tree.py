"""Innermost enclosing NVTX range per thread, by sort-and-sweep.

Ranges of one thread are sorted by (start, -end). For a query interval [t0, t1] the
candidate is the last range starting at or before t0; if it ends before t1, the answer
lies on its chain of "previous ranges that end later" (a monotonic-stack array), so the
walk never revisits ranges that cannot enclose the query. The rule: the enclosing range
with the latest start wins; ties go to the earliest end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.trace.columns import Columns


@dataclass(frozen=True)
class RangeIndex:
    order: np.ndarray  # sorted position -> row in the NVTX columns
    start: np.ndarray
    end: np.ndarray
    tkey: np.ndarray
    chain: np.ndarray  # previous range of the same thread with a strictly later end, or -1
    parent: np.ndarray  # innermost range of the same thread enclosing this one, or -1
    seg_keys: np.ndarray  # distinct thread keys, sorted
    seg_lo: np.ndarray
    seg_hi: np.ndarray


def _previous_greater(end: np.ndarray, lo: int, hi: int, strict: bool, out: np.ndarray) -> None:
    stack: list[int] = []
    seg = end[lo:hi].tolist()
    for i, e in enumerate(seg):
        if strict:
            while stack and seg[stack[-1]] <= e:
                stack.pop()
        else:
            while stack and seg[stack[-1]] < e:
                stack.pop()
        out[lo + i] = lo + stack[-1] if stack else -1
        stack.append(i)


def build(nvtx: Columns) -> RangeIndex:
    """Index the ended ranges of `nvtx` (columns start, end, tkey; end < 0 means unended)."""
    rows = np.flatnonzero((nvtx.end >= 0) & (nvtx.tkey >= 0))
    order = rows[np.lexsort((-nvtx.end[rows], nvtx.start[rows], nvtx.tkey[rows]))]
    start, end, tkey = nvtx.start[order], nvtx.end[order], nvtx.tkey[order]
    seg_keys, seg_lo = np.unique(tkey, return_index=True)
    seg_hi = np.r_[seg_lo[1:], len(tkey)].astype(np.int64)
    chain = np.full(len(order), -1, dtype=np.int64)
    parent = np.full(len(order), -1, dtype=np.int64)
    for lo, hi in zip(seg_lo.tolist(), seg_hi.tolist(), strict=True):
        _previous_greater(end, lo, hi, True, chain)
        _previous_greater(end, lo, hi, False, parent)
    return RangeIndex(order, start, end, tkey, chain, parent, seg_keys, seg_lo, seg_hi)


def innermost(index: RangeIndex, q_tkey: np.ndarray, q_start: np.ndarray, q_end: np.ndarray) -> np.ndarray:
    """Sorted-position of the innermost range enclosing each query, or -1."""
    result = np.full(len(q_tkey), -1, dtype=np.int64)
    if len(q_tkey) == 0 or len(index.order) == 0:
        return result
    seg = np.searchsorted(index.seg_keys, q_tkey)
    seg_c = np.minimum(seg, len(index.seg_keys) - 1)
    known = index.seg_keys[seg_c] == q_tkey
    lo = index.seg_lo[seg_c]
    hi = index.seg_hi[seg_c]
    # Within the thread's segment: last range starting at or before the query start.
    cand = np.full(len(q_tkey), -1, dtype=np.int64)
    qi = np.flatnonzero(known)
    # searchsorted over (tkey, start) pairs: offset starts by segment.
    pos = np.empty(len(qi), dtype=np.int64)
    for s in np.unique(seg_c[qi]).tolist():
        sel = qi[seg_c[qi] == s]
        a, b = int(index.seg_lo[s]), int(index.seg_hi[s])
        pos[np.searchsorted(qi, sel)] = a + np.searchsorted(index.start[a:b], q_start[sel], "right") - 1
    cand[qi] = pos
    active = np.flatnonzero(known & (cand >= lo) & (cand < hi))
    c = cand[active]
    while len(active):
        good = index.end[c] >= q_end[active]
        result[active[good]] = c[good]
        nxt = index.chain[c[~good]]
        keep = nxt >= 0
        active = active[~good][keep]
        c = nxt[keep]
    return result


def depths(index: RangeIndex) -> np.ndarray:
    """Nesting depth of each sorted range (0 = outermost); parents precede children."""
    depth = np.zeros(len(index.parent), dtype=np.int64)
    parent = index.parent.tolist()
    for i, p in enumerate(parent):
        if p >= 0:
            depth[i] = depth[p] + 1
    return depth


def inclusive_sums(index: RangeIndex, own: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """Add each range's value to all its ancestors (own -> inclusive), level by level."""
    total = own.astype(np.int64).copy()
    for level in range(int(depth.max(initial=0)), 0, -1):
        idx = np.flatnonzero(depth == level)
        np.add.at(total, index.parent[idx], total[idx])
    return total


def has_same_name_ancestor(index: RangeIndex, name: np.ndarray) -> np.ndarray:
    """True where a range is nested (at any depth) inside another range of the same name."""
    result = np.zeros(len(name), dtype=bool)
    cur = index.parent.copy()
    alive = np.flatnonzero(cur >= 0)
    while len(alive):
        hit = name[cur[alive]] == name[alive]
        result[alive[hit]] = True
        alive = alive[~hit]
        cur[alive] = index.parent[cur[alive]]
        alive = alive[cur[alive] >= 0]
    return result
