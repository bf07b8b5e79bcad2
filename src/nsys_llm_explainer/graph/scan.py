"""Vectorized building blocks of the replay: chains evaluated in closed form, and the replay
windows (Blocks) with the rows each one holds.

A chain is a sequence of nodes that run one after another (the calls of one host thread,
the work of one stream). Its end times follow the max-plus recurrence

    e[i] = max(e[i-1] + a[i], b[i]),   e[-1] = init

(a: what the node adds after its predecessor, b: the earliest end other constraints allow),
whose closed form e[i] = A[i] + max(init, max_{j<=i} (b[j] - A[j])) with A the running sum
of a is a cumulative sum and a running maximum: no Python loop over nodes. Many chains are
stored back to back; a segment id per node says where each one begins.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.frozen import frozen

NEG = -(1 << 40)  # "no constraint": below any time a block can hold (times are block-relative)
_LIMIT = 1 << 40  # |values| the packed running maximum can carry
_SPAN = 1 << 42  # per-segment offset of the packed running maximum (> 2 * _LIMIT)
_MAX_SEGMENTS = 1 << 20  # segments * _SPAN must stay below 2^63


def starts_of(segment: np.ndarray) -> np.ndarray:
    """Per node: True where a new segment begins (segments are stored contiguously)."""
    first = np.ones(len(segment), dtype=bool)
    first[1:] = segment[1:] != segment[:-1]
    return first


def segmented_cumsum(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Running sum restarting at every `first` node."""
    total = np.cumsum(values)
    starts = np.flatnonzero(first)
    base = total[starts] - values[starts]
    seg = np.cumsum(first) - 1
    return total - base[seg]


def segmented_cummax(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Running maximum restarting at every `first` node."""
    if len(values) == 0:
        return values.copy()
    offset = _offsets(first)
    if offset is None:  # pragma: no cover - over a million segments
        seg = np.cumsum(first) - 1
        return pd.Series(values).groupby(seg).cummax().to_numpy(np.int64)
    return _packed_cummax(np.array(values, dtype=np.result_type(values.dtype, np.int64)), offset)


def _offsets(first: np.ndarray) -> np.ndarray | None:
    """Per node its segment's offset in the packed running maximum (None: too many
    segments to pack)."""
    seg = np.cumsum(first) - 1
    return seg * _SPAN if len(seg) and int(seg[-1]) < _MAX_SEGMENTS else None


def _packed_cummax(v: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """The segmented running maximum of `v` (overwritten and returned): clipped to
    +-_LIMIT, each segment lifted by its offset so one running maximum never crosses a
    segment, then lowered back."""
    np.clip(v, -_LIMIT, _LIMIT, out=v)
    v += offset
    np.maximum.accumulate(v, out=v)
    v -= offset
    return v


def chain_ends(a: np.ndarray, b: np.ndarray, first: np.ndarray, init: np.ndarray) -> np.ndarray:
    """End times of every chain node: e[i] = max(e[i-1] + a[i], b[i]), with e[-1] = init[i]
    at each segment's first node (init is read only there; NEG: no initial constraint)."""
    return Chains(a, first).ends(b, init)


class Chains:
    """chain_ends for one `a` and `first` and many `b`: a replay evaluates the same chains
    once per round with new constraints, so the running sum of `a` and the segment offsets
    are computed once."""

    def __init__(self, a: np.ndarray, first: np.ndarray) -> None:
        self.first = first
        self.acc = segmented_cumsum(a, first) if len(a) else np.empty(0, np.int64)
        self.offset = _offsets(first)
        self.init_at = np.flatnonzero(first)

    def ends(self, b: np.ndarray, init: np.ndarray) -> np.ndarray:
        if len(self.acc) == 0:
            return np.empty(0, np.int64)
        v = b - self.acc
        at = self.init_at
        v[at] = np.maximum(v[at], init[at])
        if self.offset is None:  # pragma: no cover - over a million chains
            return self.acc + segmented_cummax(v, self.first)
        v = _packed_cummax(v, self.offset)
        v += self.acc
        return v


def previous_in_chain(values: np.ndarray, first: np.ndarray, at_first: np.ndarray | int) -> np.ndarray:
    """values shifted by one within each segment; `at_first` where a segment begins."""
    out = np.empty_like(values)
    out[1:] = values[:-1]
    if isinstance(at_first, np.ndarray):
        out[first] = at_first[first]
    else:
        out[first] = at_first
    return out


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All positions lo[i] <= p < hi[i], and the i each came from (no loop over i)."""
    counts = np.maximum(hi - lo, 0)
    owner = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    if len(owner) == 0:
        return owner, owner
    starts = np.cumsum(counts) - counts
    pos = np.arange(len(owner), dtype=np.int64) - starts[owner] + lo[owner]
    return pos, owner


@frozen
class Blocks:
    """Replay windows, one per replayed step: absolute [start, end) of process pid."""

    pid: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.pid)


def _sorted_view(t: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """t in ascending order, and the order used (None: already ascending)."""
    if len(t) < 2 or bool((t[1:] >= t[:-1]).all()):
        return t, None
    order = np.argsort(t, kind="stable")
    return t[order], order


def rows_in_windows(
    pid: np.ndarray, t: np.ndarray, blocks: Blocks
) -> tuple[np.ndarray, np.ndarray]:
    """(row, block) for every row whose pid is the block's and whose t is in its window."""
    rows, owner = [], []
    for p in distinct_few(blocks.pid).tolist():
        mine = np.flatnonzero(pid == p)
        if len(mine) == 0:
            continue
        bsel = np.flatnonzero(blocks.pid == p)
        ts, order = _sorted_view(t[mine])
        lo = np.searchsorted(ts, blocks.start[bsel], "left")
        hi = np.searchsorted(ts, blocks.end[bsel], "left")
        pos, which = expand_ranges(lo, hi)
        picked = mine[pos] if order is None else mine[order[pos]]
        rows.append(picked)
        owner.append(bsel[which])
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(rows), np.concatenate(owner)


def carried_in(
    pid: np.ndarray, launched: np.ndarray, end: np.ndarray, blocks: Blocks
) -> tuple[np.ndarray, np.ndarray]:
    """(row, block) for rows launched before a block of their process opened and ending
    after it opened."""
    rows, owner = [], []
    for p in distinct_few(blocks.pid).tolist():
        bsel = np.flatnonzero(blocks.pid == p)
        bsel = bsel[np.argsort(blocks.start[bsel], kind="stable")]
        bs = blocks.start[bsel]
        mine = np.flatnonzero(pid == p)
        lo = np.searchsorted(bs, launched[mine], "right")
        hi = np.searchsorted(bs, end[mine], "left")
        hit = hi > lo
        pos, which = expand_ranges(lo[hit], hi[hit])
        rows.append(mine[hit][which])
        owner.append(bsel[pos])
    if not rows:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(rows), np.concatenate(owner)


def last_launched_before(
    ln: np.ndarray, first: np.ndarray, lo: np.ndarray, t: np.ndarray
) -> np.ndarray:
    """Per query: the last index of its chain (which starts at lo) with ln < t, or -1; ln is
    non-decreasing within each chain (chains start where `first` is set)."""
    if len(t) == 0:
        return np.full(0, -1, np.int64)
    base = int(min(ln.min(initial=0), t.min(initial=0)))
    span = int(max(ln.max(initial=0), t.max(initial=0))) - base + 2
    chain_index = np.cumsum(first) - 1
    if span * (int(chain_index[-1]) + 1) >= (1 << 62):  # pragma: no cover - blocks are short
        raise ValueError("block too long to replay")
    key = chain_index * span + (ln - base)  # ascending: chain-major, ln within
    pos = np.searchsorted(key, chain_index[lo] * span + (t - base), "left") - 1
    return np.where(pos >= lo, pos, -1)
