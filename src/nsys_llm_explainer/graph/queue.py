"""Waits the trace shows by their timing: calls blocked on a full launch queue, and
synchronizes whose awaited work no record names.

A GPU's launch queue holds a bounded number of operations that were issued and have not
finished (about a thousand on NVIDIA GPUs). A launch, copy or memset call made while it is
full cannot return until an earlier operation of that device finishes and makes room. Such
a call shows two signs in the trace: about a queue's depth of operations were pending when
it began, and it returned right after one of them ended, later than its own cost explains.
Its duration is then the device's, not the host's: the replay makes it wait for that
operation (a host-wait edge with the measured return delay), so a faster device shortens
it, instead of keeping the measured duration.

The depth is read from the trace: per process and device, the most operations ever pending
at the start of such a call. A call is blocked when at least QUEUE_FULL of that depth were
pending at its start, the depth is at least MIN_DEPTH, an operation pending at its start
ended later than the call would have returned on its own cost (WAIT_FACTOR times the
process's usual cost for that API, from calls made with the queue not full), the call
returned within RETURN_TOL_NS of it, and at least MIN_BLOCKED calls show that queue full.

A synchronize whose stream or event the trace does not name is matched the same way: the
work it waited for is the operation of its process that ended last before it returned,
within RETURN_TOL_NS, after the call would have returned on its own cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.groups import group_codes

MIN_DEPTH = 32
QUEUE_FULL = 0.9
WAIT_FACTOR = 1.5  # the operation that made room ended this many times the usual cost after the call began
MIN_BLOCKED = 3  # calls of one queue that must show it full
RETURN_TOL_NS = 200_000


@dataclass(frozen=True)
class TimedWaits:
    """Wait edges found by timing: the task whose end released the call, the call (host
    node), and the call's measured delay after that end."""

    src: np.ndarray
    dst: np.ndarray
    ret: np.ndarray
    depth: int  # the deepest queue found full (0: none)

    @staticmethod
    def none() -> TimedWaits:
        z = np.empty(0, np.int64)
        return TimedWaits(z, z, z, 0)


class _Timeline:
    """Per group of tasks: how many were issued by a time, how many had ended, and which
    ended last before a time; queries are vectorized over (group, time) pairs."""

    def __init__(self, group: np.ndarray, issue: np.ndarray, end: np.ndarray) -> None:
        self.base = int(min(issue.min(initial=0), end.min(initial=0))) - 1
        self.span = int(max(issue.max(initial=0), end.max(initial=0))) - self.base + 2
        self.ok = self.span * (int(group.max(initial=0)) + 1) < (1 << 62)
        if not self.ok:  # pragma: no cover - blocks are far shorter than 2^40 ns
            return
        ki = group * self.span + (issue - self.base)
        ke = group * self.span + (end - self.base)
        self.issue_sorted = np.sort(ki)
        self.end_order = np.argsort(ke, kind="stable")
        self.end_sorted = ke[self.end_order]

    def _key(self, group: np.ndarray, t: np.ndarray) -> np.ndarray:
        return group * self.span + (np.clip(t, self.base + 1, self.base + self.span - 1) - self.base)

    def pending(self, group: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Tasks of the group issued before t and not ended by t."""
        lo = group * self.span
        issued = np.searchsorted(self.issue_sorted, self._key(group, t), "left") - \
            np.searchsorted(self.issue_sorted, lo, "left")
        ended = np.searchsorted(self.end_sorted, self._key(group, t), "right") - \
            np.searchsorted(self.end_sorted, lo, "left")
        return np.maximum(issued - ended, 0)

    def last_end_by(self, group: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The task of the group that ended last at or before t (-1: none)."""
        pos = np.searchsorted(self.end_sorted, self._key(group, t), "right") - 1
        inside = (pos >= 0) & (pos >= np.searchsorted(self.end_sorted, group * self.span, "left"))
        return np.where(inside, self.end_order[np.maximum(pos, 0)], -1)


def queue_waits(
    h_start: np.ndarray, h_end: np.ndarray, candidate: np.ndarray, h_key: np.ndarray, h_group: np.ndarray,
    h_pd: np.ndarray, h_seen: np.ndarray, d_group: np.ndarray, d_issue: np.ndarray, d_end: np.ndarray,
) -> tuple[TimedWaits, np.ndarray]:
    """Calls blocked on a full launch queue (see the module docstring), and per host node its
    usual cost (the median duration of its process's calls of its API made with the queue not
    full; the node's own duration for other nodes).

    candidate: per host node, a launch, copy or memset call that may have waited; h_key: its
    process and API; h_group: the queue it issues to (block, process and device; -1: unknown);
    h_pd: the queue's process and device (its depth is theirs); h_seen: the call's operation
    is among the tasks; d_group: per task, its queue. A call whose operation the capture does
    not hold (it ran after the capture ended) still holds a place in the queue from its start."""
    usual = h_end - h_start
    cand = np.flatnonzero(candidate & (h_group >= 0))
    if len(cand) == 0 or len(d_group) == 0:
        return TimedWaits.none(), usual
    never = int(max(d_end.max(initial=0), h_end.max(initial=0))) + 1
    unseen = cand[~h_seen[cand]]
    tl = _Timeline(np.r_[d_group, h_group[unseen]], np.r_[d_issue, h_start[unseen]],
                   np.r_[d_end, np.full(len(unseen), never)])
    if not tl.ok:  # pragma: no cover
        return TimedWaits.none(), usual
    g, pd_code = h_group[cand], h_pd[cand]
    pending = tl.pending(g, h_start[cand])
    depth = np.zeros(int(h_pd.max()) + 1, np.int64)
    np.maximum.at(depth, pd_code, pending)
    full = (depth[pd_code] >= MIN_DEPTH) & (pending >= QUEUE_FULL * depth[pd_code])
    dur = (h_end - h_start)[cand]
    usual[cand] = _median_by(h_key[cand], dur, ~full)
    if not full.any():
        return TimedWaits.none(), usual
    freed = tl.last_end_by(g, h_end[cand])
    ok = full & (freed >= 0) & (freed < len(d_group))
    f = np.where(ok, freed, 0)
    delay = h_end[cand] - d_end[f]
    ok &= (d_issue[f] < h_start[cand]) & (d_end[f] >= h_start[cand] + WAIT_FACTOR * usual[cand]) & \
        (delay <= RETURN_TOL_NS)
    # A queue is full where several calls show it, not one slow call in a burst of work.
    per_queue = np.bincount(pd_code[ok], minlength=len(depth))
    ok &= per_queue[pd_code] >= MIN_BLOCKED
    if not ok.any():
        return TimedWaits.none(), usual
    return TimedWaits(freed[ok], cand[ok], delay[ok], int(depth[pd_code[ok]].max())), usual


def sync_waits(
    h_start: np.ndarray, h_end: np.ndarray, unmatched: np.ndarray, own: np.ndarray, h_group: np.ndarray,
    d_group: np.ndarray, d_issue: np.ndarray, d_end: np.ndarray,
) -> TimedWaits:
    """Synchronizes with no recorded scope (unmatched) matched to the work whose end they
    returned after (see the module docstring); own: each call's cost without waiting;
    h_group/d_group: a call's and a task's block and process."""
    calls = np.flatnonzero(unmatched)
    if len(calls) == 0 or len(d_group) == 0:
        return TimedWaits.none()
    tl = _Timeline(d_group, d_issue, d_end)
    if not tl.ok:  # pragma: no cover
        return TimedWaits.none()
    freed = tl.last_end_by(h_group[calls], h_end[calls])
    f = np.maximum(freed, 0)
    delay = h_end[calls] - d_end[f]
    ok = (freed >= 0) & (d_issue[f] < h_start[calls]) & (d_end[f] >= h_start[calls] + own[calls]) \
        & (delay <= RETURN_TOL_NS)
    return TimedWaits(freed[ok], calls[ok], delay[ok], 0)


def _median_by(key: np.ndarray, values: np.ndarray, sample: np.ndarray) -> np.ndarray:
    """Per row: the median of `values` over the sampled rows of its key (over all rows of the
    key when none is sampled)."""
    codes, _ = group_codes(key)
    every = pd.Series(values).groupby(codes).median()
    picked = pd.Series(values[sample]).groupby(codes[sample]).median()
    med = every.copy()
    med[picked.index] = picked
    return med.to_numpy()[codes].astype(np.int64)
