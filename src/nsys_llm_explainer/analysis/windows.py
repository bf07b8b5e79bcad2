"""Greedy non-overlapping windows: of the windows [pos, pos + length) of each group, keep
the first, then the next one that starts at or after the kept one's end, and so on (left to
right). That is the most windows that can be kept without any two sharing a position, and
it is what a reader counts by hand ("A A A A" holds "A A" twice, not three times).

Vectorized with pointer doubling: next[i] is the first window of i's group starting at or
after i's end; the kept windows are the path first -> next -> next ... of each group, found
in O(n log n) without a Python loop per window (a run of a million identical kernels is
one path of 500,000 windows).
"""

from __future__ import annotations

import numpy as np


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
