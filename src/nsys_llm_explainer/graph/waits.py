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

Cross-stream edges from event record/wait pairs.

`cudaEventRecord(e, A)` then `cudaStreamWaitEvent(B, e)`: the work queued on B after the
wait starts only once the work queued on A before the record has finished. Both formats
record the wait (a synchronization record of type "stream wait event" on stream B); the
recording side is named by sync().record_stream / record_corr where the trace has it
(PyTorch profiler `wait_on_stream` and `wait_on_cuda_event_record_corr_id`; Nsight Systems
CUPTI_ACTIVITY_KIND_CUDA_EVENT, written with --cuda-event-trace). A wait whose record the
trace does not name is counted, never guessed: the delay it causes stays in the replay as
an unexplained wait."""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.join import match_calls
from nsys_llm_explainer.analysis.stats import sort_within_groups
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.graph.host import EVENT, api_tables
from nsys_llm_explainer.graph.scan import Blocks, last_launched_before, rows_in_windows, segmented_cummax
from nsys_llm_explainer.trace.data import TraceData, Unavailable

MIN_DEPTH = 32
QUEUE_FULL = 0.9
WAIT_FACTOR = 1.5  # the operation that made room ended this many times the usual cost after the call began
MIN_BLOCKED = 3  # calls of one queue that must show it full
RETURN_TOL_NS = 200_000


@frozen
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
    codes, (keys,) = group_codes(key)
    n = len(keys)
    every = sort_within_groups(values, codes, n).median()
    picked = sort_within_groups(values[sample], codes[sample], n).median()
    med = np.where(np.isnan(picked), every, picked)
    return med[codes].astype(np.int64)


STREAM_WAIT_EVENT = 2


def cross_stream(
    data: TraceData, blocks: Blocks, block: np.ndarray, chain: np.ndarray, first: np.ndarray,
    pid: np.ndarray, device: np.ndarray, stream: np.ndarray, launched: np.ndarray, rt: Any,
) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(source task, waiting task) pairs, and counts of waits found and not recovered."""
    counts = {"stream_wait_events": 0, "stream_wait_events_unrecovered": 0,
              "stream_wait_calls_without_record": _calls_without_record(data, blocks, rt)}
    empty = np.empty(0, np.int64)
    try:
        sy = data.sync()
    except Unavailable:
        return empty, empty, counts
    origin = blocks.start
    if len(sy) == 0 or len(chain) == 0:
        return empty, empty, counts
    waits = np.flatnonzero(sy.sync_type == STREAM_WAIT_EVENT)
    if len(waits) == 0:
        return empty, empty, counts
    kind_of_api, _ = api_tables(data.runtime_api_names())
    wcall = match_calls(sy.pid[waits], sy.corr[waits], rt, kind_of_api[rt.api] == EVENT)
    # A wait belongs to every block of its process whose window holds its call (any thread
    # of the process may issue it: it acts on the stream, not on the thread).
    t_call = np.where(wcall >= 0, rt.start[np.maximum(wcall, 0)], sy.start[waits])
    which, w_block = rows_in_windows(sy.pid[waits], t_call, blocks)
    w = waits[which]
    counts["stream_wait_events"] = int(len(np.unique(w)))
    has_record = ("record_stream" in sy) and ("record_corr" in sy)
    if not has_record:
        counts["stream_wait_events_unrecovered"] = int(len(np.unique(w)))
        return empty, empty, counts
    rstream, rcorr = sy.record_stream[w], sy.record_corr[w]
    known = (rstream >= 0) & (rcorr > 0)
    rcall = np.full(len(w), -1, np.int64)
    if known.any():
        rcall[known] = match_calls(sy.pid[w][known], rcorr[known], rt, kind_of_api[rt.api] == EVENT)
    known &= rcall >= 0
    counts["stream_wait_events_unrecovered"] = int(len(np.unique(w[~known])))
    w, w_block, rstream, rcall = w[known], w_block[known], rstream[known], rcall[known]
    t_wait = t_call[which][known] - origin[w_block]
    if len(w) == 0:
        return empty, empty, counts
    t_record = rt.start[rcall] - origin[w_block]
    chain_start = np.flatnonzero(first)
    ckey = _chain_keys(block[chain_start], pid[chain_start], device[chain_start], stream[chain_start])
    corder = np.argsort(ckey, kind="stable")
    src_chain = _find(ckey, corder, _chain_keys(w_block, sy.pid[w], sy.device[w], rstream))
    dst_chain = _find(ckey, corder, _chain_keys(w_block, sy.pid[w], sy.device[w], sy.stream[w]))
    ok = (src_chain >= 0) & (dst_chain >= 0)
    src = np.full(len(w), -1, np.int64)
    dst = np.full(len(w), -1, np.int64)
    ln = _chain_running_max(launched, first)
    bounds = np.r_[chain_start, len(chain)]
    for i in np.flatnonzero(ok).tolist():  # one pair per wait; waits are few per block
        a, b = bounds[src_chain[i]], bounds[src_chain[i] + 1]
        k = a + int(np.searchsorted(ln[a:b], t_record[i], "left")) - 1
        src[i] = k if k >= a else -1
        a, b = bounds[dst_chain[i]], bounds[dst_chain[i] + 1]
        k = a + int(np.searchsorted(ln[a:b], t_wait[i], "left"))
        dst[i] = k if k < b else -1
    good = (src >= 0) & (dst >= 0)
    counts["stream_wait_edges"] = int(len(np.unique(w[good])))
    return src[good], dst[good], counts


def _chain_keys(block: np.ndarray, pid: np.ndarray, device: np.ndarray, stream: np.ndarray) -> np.ndarray:
    return ((block.astype(np.int64) * (1 << 20) + (pid & 0xFFFFF)) * 64 + (device & 63)) * (1 << 16) + (stream & 0xFFFF)


def _find(keys: np.ndarray, order: np.ndarray, query: np.ndarray) -> np.ndarray:
    if len(keys) == 0:
        return np.full(len(query), -1, np.int64)
    sk = keys[order]
    pos = np.minimum(np.searchsorted(sk, query), len(sk) - 1)
    return np.where(sk[pos] == query, order[pos], -1)


def _chain_running_max(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    return segmented_cummax(values, first)


_WAIT_CALL = ("cudaStreamWaitEvent", "cuStreamWaitEvent", "hipStreamWaitEvent")


def _calls_without_record(data: TraceData, blocks: Blocks, rt: Any) -> int:
    """Stream-wait calls in the blocks that no synchronization record describes (the trace
    has no such records at all): which streams they join is unknown."""
    try:
        sy = data.sync()
        if len(sy) and (sy.sync_type == STREAM_WAIT_EVENT).any():
            return 0
    except Unavailable:
        pass
    codes = [i for i, n in enumerate(data.runtime_api_names()) if n.startswith(_WAIT_CALL)]
    if not codes or len(rt) == 0:
        return 0
    rows = np.flatnonzero(np.isin(rt.api, codes))
    which, _ = rows_in_windows(rt.pid[rows], rt.start[rows], blocks)
    return int(len(np.unique(rows[which])))


# Stream types (CUPTI CUpti_ActivityStreamFlag, Nsight Systems TARGET_INFO_CUDA_STREAM.flag)
BLOCKING_STREAM, NON_BLOCKING_STREAM, NULL_STREAM = 1, 2, 3


def stream_types(data: TraceData) -> Any:
    """pid, stream, type of each stream the trace describes, or None when it describes none
    (then the legacy default stream's rules cannot be applied: counted, never assumed)."""
    try:
        cols = data.stream_types()
    except Unavailable:
        return None
    return cols if len(cols) else None


def default_stream(
    types: Any, block: np.ndarray, chain: np.ndarray, first: np.ndarray, pid: np.ndarray,
    device: np.ndarray, stream: np.ndarray, launched: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Edges of the legacy default stream's rules: its work starts after everything issued
    before it to the blocking streams of its device, and work on a blocking stream starts
    after everything issued before it to the default stream."""
    empty = np.empty(0, np.int64)
    if types is None or len(chain) == 0:
        return empty, empty
    key = (types.pid.astype(np.int64) << 32) | (types.stream & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")
    skey, stype = key[order], types.type[order]
    tkey = (pid.astype(np.int64) << 32) | (stream & 0xFFFFFFFF)
    pos = np.minimum(np.searchsorted(skey, tkey), max(len(skey) - 1, 0))
    kind = np.where(skey[pos] == tkey, stype[pos], 0) if len(skey) else np.zeros(len(tkey), np.int64)
    starts = np.flatnonzero(first)
    c_kind = kind[starts]
    if not (c_kind == NULL_STREAM).any() or not (c_kind == BLOCKING_STREAM).any():
        return empty, empty
    group = pd_codes(block[starts], pid[starts], device[starts])
    ln = _chain_running_max(launched, first)
    src_parts, dst_parts = [], []
    for target_kind, source_kind in ((NULL_STREAM, BLOCKING_STREAM), (BLOCKING_STREAM, NULL_STREAM)):
        targets = np.flatnonzero(kind == target_kind)
        sources = np.flatnonzero(c_kind == source_kind)  # chain numbers
        if len(targets) == 0 or len(sources) == 0:
            continue
        chain_no = np.cumsum(first) - 1
        tg = group[chain_no[targets]]
        # every (target task, source chain of the same group) pair
        by_group: dict[int, list[int]] = {}
        for c in sources.tolist():
            by_group.setdefault(int(group[c]), []).append(c)
        for gid, chains in by_group.items():
            mine = targets[tg == gid]
            for c in chains:
                lo = np.full(len(mine), starts[c], np.int64)
                src = last_launched_before(ln, first, lo, launched[mine])
                ok = src >= 0
                src_parts.append(src[ok])
                dst_parts.append(mine[ok])
    if not src_parts:
        return empty, empty
    return np.concatenate(src_parts), np.concatenate(dst_parts)


def pd_codes(*cols: np.ndarray) -> np.ndarray:
    codes, _ = group_codes(*cols)
    return codes
