"""Cross-stream edges from event record/wait pairs.

`cudaEventRecord(e, A)` then `cudaStreamWaitEvent(B, e)`: the work queued on B after the
wait starts only once the work queued on A before the record has finished. Both formats
record the wait (a synchronization record of type "stream wait event" on stream B); the
recording side is named by sync().record_stream / record_corr where the trace has it
(PyTorch profiler `wait_on_stream` and `wait_on_cuda_event_record_corr_id`; Nsight Systems
CUPTI_ACTIVITY_KIND_CUDA_EVENT, written with --cuda-event-trace). A wait whose record the
trace does not name is counted, never guessed: the delay it causes stays in the replay as
an unexplained wait.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer.analysis.join import match_calls
from nsys_llm_explainer.graph.tasks import Blocks, rows_in_windows
from nsys_llm_explainer.trace.data import TraceData, Unavailable

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
    from nsys_llm_explainer.graph.host import EVENT, api_tables

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
    from nsys_llm_explainer.graph.scan import segmented_cummax

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
                from nsys_llm_explainer.graph.build import _last_launched_before

                src = _last_launched_before(ln, first, lo, launched[mine])
                ok = src >= 0
                src_parts.append(src[ok])
                dst_parts.append(mine[ok])
    if not src_parts:
        return empty, empty
    return np.concatenate(src_parts), np.concatenate(dst_parts)


def pd_codes(*cols: np.ndarray) -> np.ndarray:
    from nsys_llm_explainer.analysis.groups import group_codes

    codes, _ = group_codes(*cols)
    return codes
