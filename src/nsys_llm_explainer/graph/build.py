"""The dependency graph of the replayed blocks, as flat arrays.

Nodes: the host calls of each launching thread (host.py) and the device tasks (tasks.py).
Edges:
- host order: a thread's calls one after another, with the measured host work between them;
- launch: a task starts no earlier than its launch call began plus the launch latency;
- stream order: a stream's tasks run one after another, with the measured queue gap;
- host waits: a blocking call ends no earlier than the work it waits for, plus the time the
  call takes to return after it (host.py says what each call waits for);
- cross-stream (event record/wait pairs) where the trace names both ends (graph/waits.py).

Latencies are the typical values measured on this trace (per process and device): a
task's launch latency is the median delay between a launch call's start and its task's start
when the stream was free; the queue gap the median delay between a task and the one before
it on its stream when it was queued. A task that started later than every recovered edge
allows, by more than PIN_NS or PIN_FACTOR times the typical latency, waited for something
the trace does not record: the delay is kept as measured ("unexplained wait"), counted,
and shown on the critical path as such. A blocking call that returned before the work it
waits for ended did not wait for it: its wait edges are dropped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.groups import group_codes
from nsys_llm_explainer.analysis.join import match_calls
from nsys_llm_explainer.graph import waits
from nsys_llm_explainer.graph.host import (
    COPY,
    EVENT,
    LAUNCH,
    MEMSET,
    SYNC,
    WAIT_DEVICE,
    WAIT_EVENT,
    WAIT_NONE,
    WAIT_OWN_COPY,
    WAIT_STREAM,
    api_tables,
    host_nodes,
)
from nsys_llm_explainer.graph.scan import (
    NEG,
    Blocks,
    expand_ranges,
    last_launched_before,
    previous_in_chain,
    starts_of,
)
from nsys_llm_explainer.graph.tasks import BEFORE_CAPTURE, KERNEL, select
from nsys_llm_explainer.graph.tasks import COPY as TASK_COPY
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

PIN_NS = 20_000
SAMPLE_MAX_NS = 1_000_000  # a latency sample above this is a wait, not a latency
QUEUE_MARGIN_NS = 1_000  # a task counts as queued when its stream was busy this long after launch
PIN_FACTOR = 4
SLOW_LAUNCH_FACTOR = 10
RETURN_TOLERANCE_NS = 1_000  # a call that returns this much before its work ended did not wait
INVALID_STREAM = (1 << 32) - 1
D2H = 2
PAGEABLE = 0  # CUPTI memory kind of pageable host memory
TO_HOST = (2, 4)  # CUPTI copy kinds DtoH, AtoH
FROM_HOST = (1, 3)  # HtoD, HtoA
DEVICE_ONLY = (5, 6, 7, 8, 10)  # AtoA, AtoD, DtoA, DtoD, PtoP


@dataclass
class Graph:
    """Arrays of the blocks' graph; times are relative to each block's start (origin)."""

    origin: np.ndarray  # per block, absolute ns
    block_pid: np.ndarray
    block_len: np.ndarray  # per block, relative end of its window
    # host nodes, sorted by (block, thread, start)
    h_block: np.ndarray
    h_first: np.ndarray  # first call of its chain
    h_chain: np.ndarray
    h_tkey: np.ndarray
    h_row: np.ndarray  # runtime row
    h_api: np.ndarray
    h_kind: np.ndarray  # host.CALL_KINDS
    h_start: np.ndarray  # measured
    h_end: np.ndarray
    h_gap: np.ndarray  # host work since the previous call returned (or the block began)
    h_own: np.ndarray  # duration without waiting for the device
    h_ret: np.ndarray  # return latency after the awaited work ends
    h_readback: np.ndarray  # waits for a device-to-host copy the host reads
    h_fixed: np.ndarray  # began before the block: measured times kept
    # device tasks, sorted by (block, stream chain, start)
    d_block: np.ndarray
    d_first: np.ndarray
    d_chain: np.ndarray
    d_kind: np.ndarray  # tasks.KIND_NAMES
    d_row: np.ndarray  # row in its source table
    d_start: np.ndarray
    d_end: np.ndarray
    d_dur: np.ndarray
    d_queue: np.ndarray  # gap after the previous task of the stream
    d_lat: np.ndarray  # launch latency
    d_pin: np.ndarray  # unexplained wait kept as measured
    d_launch: np.ndarray  # host node of the launch call, -1: none in the block
    d_issue: np.ndarray  # measured start of the launch call (the task's start without one)
    d_fixed: np.ndarray  # carried in: measured times kept
    d_before: np.ndarray  # queued before the capture (the carried bucket); fixed too
    d_device: np.ndarray
    d_stream: np.ndarray
    d_name: np.ndarray  # kernel name id, -1 for other work
    d_copy_kind: np.ndarray  # CUPTI copy kind, -1 for other work
    d_bytes: np.ndarray
    # host waits: task -> call (the call ends no earlier than the task, plus h_ret)
    w_src: np.ndarray
    w_dst: np.ndarray
    w_kind: np.ndarray  # WAIT_SYNC, WAIT_COPY (a copy call waits for its own copy), WAIT_QUEUE
    # cross-stream: task -> task (the second starts no earlier than the first ends)
    x_src: np.ndarray
    x_dst: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)
    latencies: dict[str, Any] = field(default_factory=dict)

    @property
    def n_host(self) -> int:
        return len(self.h_block)

    @property
    def n_device(self) -> int:
        return len(self.d_block)


def _median(values: np.ndarray, default: int) -> int:
    return int(np.median(values)) if len(values) else default


def _typical(keys: np.ndarray, values: np.ndarray, sample: np.ndarray, default: int) -> np.ndarray:
    """Per row: the median of `values` over the sampled rows with its key (the median of
    all samples for keys without any, `default` when there are none at all)."""
    out = np.full(len(keys), _median(values[sample], default), dtype=np.int64)
    if not sample.any():
        return out
    codes, uniq = factorize(keys)
    for c in np.unique(codes[sample]).tolist():
        mine = codes == c
        out[mine] = int(np.median(values[sample & mine]))
    return out


def build(data: TraceData, blocks: Blocks) -> Graph:
    rt = data.runtime()
    names = data.runtime_api_names()
    kind_of_api, wait_of_api = api_tables(names)
    tables, chosen = select(data, blocks)
    counts: dict[str, int] = {}

    # -- device tasks -------------------------------------------------------------------
    parts: dict[str, list[np.ndarray]] = {k: [] for k in (
        "kind", "row", "block", "call", "fixed", "issued", "start", "end", "device", "stream", "pid",
        "name", "copy_kind", "bytes", "src_pageable", "dst_pageable")}
    for sel in chosen:
        cols = tables[sel.kind]
        n = len(sel.rows)
        parts["kind"].append(np.full(n, sel.kind, np.int64))
        parts["row"].append(sel.rows)
        parts["block"].append(sel.block)
        parts["call"].append(sel.call)
        parts["fixed"].append(sel.carried)
        parts["issued"].append(sel.issued)
        for c in ("start", "end", "device", "stream", "pid"):
            parts[c].append(cols[c][sel.rows])
        parts["name"].append(cols.name_id[sel.rows] if sel.kind == KERNEL else np.full(n, -1, np.int64))
        copy = sel.kind == TASK_COPY
        parts["copy_kind"].append(cols.copy_kind[sel.rows] if copy else np.full(n, -1, np.int64))
        parts["bytes"].append(cols.bytes[sel.rows] if "bytes" in cols else np.zeros(n, np.int64))
        for side in ("src", "dst"):
            parts[f"{side}_pageable"].append(
                cols[f"{side}_kind"][sel.rows] == PAGEABLE if copy else np.zeros(n, bool))
    d = {k: (np.concatenate(v) if v else np.empty(0, np.int64)) for k, v in parts.items()}
    del parts  # the per-kind pieces: only their concatenation is read from here on
    d["fixed"] = d["fixed"].astype(bool)
    d["src_pageable"] = d["src_pageable"].astype(bool)
    d["dst_pageable"] = d["dst_pageable"].astype(bool)
    origin = blocks.start
    rel = origin[d["block"]]
    d_chain_key, _ = group_codes(d["block"], d["pid"], d["device"], d["stream"])
    order = np.lexsort((d["end"], d["start"], d_chain_key))
    d = {k: v[order] for k, v in d.items()}
    d_chain = d_chain_key[order]
    rel = rel[order]
    d_start, d_end = d["start"] - rel, d["end"] - rel
    # Counts are of distinct rows: a step replayed as a warm-up too holds its rows twice.
    task_id = d["kind"] * (1 << 40) + d["row"]
    d_first = starts_of(d_chain)
    has_call = d["call"] >= 0
    # Work issued before the block (or before the capture) only needs to come before every
    # call of the block: clipped to keep block-relative times small.
    launched = np.maximum(d["issued"] - rel, -(1 << 36))
    del rel, d_chain_key, order  # the build holds its task-sized temporaries only while it reads them
    ready = launched
    counts["tasks"] = _distinct(task_id)
    counts["tasks_without_launch_call"] = _distinct(task_id[~has_call & ~d["fixed"]])
    counts["tasks_carried_in"] = _distinct(task_id[d["fixed"]])
    # Work launched in the capture before the block that had not started when the block
    # began runs at the changed speeds like the block's own (a host that runs steps ahead
    # fills the queue with them); what was running then, or was launched before the capture,
    # keeps its measured times.
    in_block = has_call & ~d["fixed"]
    d["fixed"] &= ~(has_call & (d_start >= 0))
    # The carried bucket (analysis/carried.py): kernels queued before the capture, and other
    # work issued before its first call. No step holds them.
    before = carried(data).mask
    d_before = d["fixed"] & np.where(d["kind"] == KERNEL, before[np.where(d["kind"] == KERNEL, d["row"], 0)]
                                     if len(before) else False, d["issued"] == BEFORE_CAPTURE)
    del before

    # -- host nodes ----------------------------------------------------------------------
    active = np.unique(np.stack([d["block"][in_block], rt.tkey[d["call"][in_block]]], axis=1), axis=0) \
        if in_block.any() else np.empty((0, 2), np.int64)
    hn = host_nodes(rt.start, rt.end, rt.pid, rt.tkey, blocks, active, (wait_of_api != WAIT_NONE)[rt.api])
    h_origin = origin[hn.block]
    h_start, h_end = hn.start - h_origin, hn.end - h_origin
    h_chain = hn.block * (int(hn.thread.max()) + 1 if len(hn.thread) else 1) + hn.thread
    h_first = starts_of(h_chain)
    h_api = rt.api[hn.row]
    h_kind = kind_of_api[h_api]
    # A group is what its members are: a runtime call around the driver call it makes.
    member_api = rt.api[hn.member_row]
    h_wait = np.zeros(len(hn.row), np.int64)
    np.maximum.at(h_wait, hn.member_node, wait_of_api[member_api])
    member_kind = kind_of_api[member_api]
    mk = np.zeros(len(hn.row), np.int64)
    np.maximum.at(mk, hn.member_node, np.where(member_kind == LAUNCH, 0, member_kind))
    h_kind = np.where(h_kind == 0, mk, h_kind)
    launches_any = np.zeros(len(hn.row), bool)
    np.logical_or.at(launches_any, hn.member_node, member_kind == LAUNCH)
    h_kind = np.where(launches_any, LAUNCH, h_kind)
    del member_api, member_kind, mk, launches_any

    # runtime row (in a block) -> host node
    nrt = max(len(rt), 1)
    mkey = hn.block[hn.member_node] * nrt + hn.member_row
    morder = np.argsort(mkey, kind="stable")
    mkey_sorted, mnode_sorted = mkey[morder], hn.member_node[morder]
    del mkey, morder

    def node_of(block: np.ndarray, row: np.ndarray) -> np.ndarray:
        if len(mkey_sorted) == 0:
            return np.full(len(row), -1, np.int64)
        key = block * nrt + row
        pos = np.minimum(np.searchsorted(mkey_sorted, key), len(mkey_sorted) - 1)
        return np.where((row >= 0) & (mkey_sorted[pos] == key), mnode_sorted[pos], -1)

    d_launch = np.where(in_block, node_of(d["block"], d["call"]), -1)
    counts["host_calls"] = _distinct(hn.row)
    counts["host_threads"] = _distinct(active[:, 1]) if len(active) else 0
    del active

    # -- cross-stream edges ----------------------------------------------------------------
    x_src, x_dst, xcounts = waits.cross_stream(data, blocks, d["block"], d_chain, d_first, d["pid"],
                                                d["device"], d["stream"], launched, rt)
    counts.update(xcounts)
    types = waits.stream_types(data)
    ds_src, ds_dst = waits.default_stream(types, d["block"], d_chain, d_first, d["pid"], d["device"],
                                           d["stream"], launched)
    counts["default_stream_edges"] = int(len(ds_src))
    counts["stream_types_known"] = int(types is not None)
    x_src, x_dst = np.r_[x_src, ds_src].astype(np.int64), np.r_[x_dst, ds_dst].astype(np.int64)
    cross_obs = np.full(len(d_start), NEG, np.int64)
    if len(x_src):
        np.maximum.at(cross_obs, x_dst, d_end[x_src])
    # -- typical latencies, per (process, device) ------------------------------------------
    pred_end = previous_in_chain(d_end, d_first, NEG)
    pred_end = np.where(d_first, NEG, pred_end)
    first_of_call = _first_task_of_call(d["block"], d["call"], d_start)
    key_dev = d["pid"] * 65536 + d["device"]
    lat_sample = in_block & first_of_call & (pred_end <= ready) & (d_start >= ready) \
        & (d_start - ready <= SAMPLE_MAX_NS) & (cross_obs <= ready)
    lat_key = key_dev * 4 + d["kind"]
    lat = _typical(lat_key, d_start - ready, lat_sample, 0)
    # A copy from pageable memory to the device starts once its call has staged (part of)
    # the data: how long that takes grows with the bytes, so its own delay is kept.
    staged = (d["kind"] == TASK_COPY) & np.isin(d["copy_kind"], FROM_HOST) & d["src_pageable"] & has_call
    lat = np.where(staged & ~d["fixed"], np.maximum(d_start - ready, 0), lat)
    queued = ~d_first & (pred_end >= ready + lat + QUEUE_MARGIN_NS) & ~d["fixed"]
    queue_sample = queued & (d_start >= pred_end) & (d_start - pred_end <= SAMPLE_MAX_NS)
    q_typ = _typical(key_dev * 4 + d["kind"], d_start - pred_end, queue_sample, 0)
    overlap = ~d_first & (d_start < pred_end) & ~d["fixed"]
    d_queue = np.where(overlap, d_start - pred_end, q_typ)
    counts["tasks_overlapping_stream_predecessor"] = _distinct(task_id[overlap])

    model = np.maximum.reduce([
        np.where(d_first, NEG, pred_end + d_queue),
        np.where(d_launch >= 0, ready + lat, 0),  # no launch call: the block's start
        cross_obs,
    ])
    residual = d_start - model
    pin_limit = np.maximum(PIN_NS, PIN_FACTOR * np.maximum(lat, q_typ))
    pinned = ~d["fixed"] & (residual > pin_limit)
    d_pin = np.where(pinned, residual, 0)
    with_call = pinned & (d_launch >= 0)
    counts["unexplained_waits"] = _distinct(task_id[with_call])
    counts["unexplained_wait_ns"] = _distinct_sum(task_id[with_call], d_pin[with_call])
    counts["tasks_kept_at_measured_offset"] = _distinct(task_id[pinned & (d_launch < 0)])
    del task_id, has_call, in_block, cross_obs, pred_end, first_of_call, key_dev, lat_key, staged, queued, \
        overlap, model, residual, pin_limit, pinned, with_call

    # -- host waits ------------------------------------------------------------------------
    w_src, w_dst, own_edge, wcounts = _waits(
        data, rt, hn, h_wait, h_kind, h_start, d, d_chain, d_first, launched, node_of
    )
    counts.update(wcounts)
    if len(w_src):
        keep = ~hn.fixed[w_dst]
        w_src, w_dst, own_edge = w_src[keep], w_dst[keep], own_edge[keep]
    h_dur = h_end - h_start
    w_end = np.full(len(h_start), NEG, np.int64)
    if len(w_src):
        np.maximum.at(w_end, w_dst, d_end[w_src])
    blocking = w_end > NEG // 2
    waited = blocking & (w_end > h_start)
    # A call that returned well before the work it would wait for ended did not wait.
    contradicted = waited & (h_end < w_end - RETURN_TOLERANCE_NS)
    if contradicted.any():
        keep = ~contradicted[w_dst]
        w_src, w_dst, own_edge = w_src[keep], w_dst[keep], own_edge[keep]
        blocking &= ~contradicted
        waited &= ~contradicted
    counts["waits_not_confirmed_by_timing"] = _distinct(hn.row[contradicted])
    hkey = rt.pid[hn.row] * 4096 + np.minimum(h_api, 4095)
    ret = _typical(hkey, h_end - w_end, waited & (h_end >= w_end) & (h_end - w_end <= SAMPLE_MAX_NS), 0)
    own_typ = _typical(hkey, h_dur, blocking & ~waited, 0)
    h_own = np.where(waited, np.minimum(h_dur, own_typ), h_dur)
    late = waited & (h_end - (w_end + ret) > PIN_NS)
    h_ret = np.where(late, h_end - w_end, ret)
    # What a copy call does after the work it waits for (moving data through the staging
    # buffer) is its own work, growing with the bytes: kept as measured.
    own_copy = np.zeros(len(h_start), bool)
    own_copy[w_dst[own_edge]] = True
    h_ret = np.where(own_copy & waited, np.maximum(h_end - w_end, 0), h_ret)
    w_kind = np.where(own_edge, WAIT_COPY, WAIT_SYNC)
    scoped = np.zeros(len(h_start), bool)
    scoped[w_dst] = True
    unmatched = (h_wait != WAIT_NONE) & (h_wait != WAIT_OWN_COPY) & ~scoped & ~hn.fixed & ~contradicted
    queued_kind = np.isin(h_kind, (LAUNCH, COPY, MEMSET)) & ~hn.fixed & ~scoped
    timed, full, usual_call = _timed_waits(hn, rt, d, d_launch, launched, d_end, h_start, h_end, hkey, own_typ,
                                           unmatched, queued_kind)
    h_own[timed.dst] = np.minimum(h_dur[timed.dst], own_typ[timed.dst])
    h_ret[timed.dst] = timed.ret
    counts["waits_found_by_timing"] = _distinct(hn.row[timed.dst])
    h_own[full.dst] = np.minimum(h_dur[full.dst], usual_call[full.dst])
    h_ret[full.dst] = full.ret
    counts["queue_waits"] = _distinct(hn.row[full.dst])
    counts["queue_wait_ns"] = _distinct_sum(hn.row[full.dst], (h_dur - h_own)[full.dst]) if len(full.dst) else 0
    counts["queue_depth"] = full.depth
    w_src = np.r_[w_src, timed.src, full.src].astype(np.int64)
    w_dst = np.r_[w_dst, timed.dst, full.dst].astype(np.int64)
    w_kind = np.r_[w_kind, np.full(len(timed.src), WAIT_SYNC), np.full(len(full.src), WAIT_QUEUE)].astype(np.int64)
    queue_blocked = np.zeros(len(h_start), bool)
    queue_blocked[full.dst] = True
    counts["host_waits"] = _distinct(hn.row[blocking])
    counts["host_waits_longer_than_explained"] = _distinct(hn.row[late])
    # Launch calls far longer than the process's usual one waited inside the driver (a full
    # launch queue is found above; a lock, lazy module loading): kept as measured, and counted.
    launch = (h_kind == LAUNCH) & ~hn.fixed
    usual = _typical(rt.pid[hn.row], h_own, launch & ~queue_blocked, 0)
    slow = launch & ~queue_blocked & (h_own > np.maximum(PIN_NS, SLOW_LAUNCH_FACTOR * usual))
    counts["slow_launch_calls"] = _distinct(hn.row[slow])
    counts["slow_launch_call_ns"] = _distinct_sum(hn.row[slow], h_own[slow]) if slow.any() else 0
    prev_end = previous_in_chain(h_end, h_first, 0)
    h_gap = np.where(hn.fixed, 0, np.maximum(h_start - prev_end, 0))

    d_readback = (d["copy_kind"] == D2H) & (d["bytes"] <= READBACK_MAX_BYTES)
    h_readback = np.zeros(len(h_start), bool)
    if len(w_src):
        last_is_rb = d_readback[w_src]
        np.logical_or.at(h_readback, w_dst, last_is_rb)

    latencies = {
        "launch_ns": _median(lat[lat_sample], 0) if lat_sample.any() else None,
        "queue_ns": _median(q_typ[queue_sample], 0) if queue_sample.any() else None,
        "return_ns": _median(ret[waited], 0) if waited.any() else None,
    }
    return Graph(
        origin=origin, block_pid=blocks.pid, block_len=blocks.end - blocks.start,
        h_block=hn.block, h_first=h_first, h_chain=h_chain, h_tkey=rt.tkey[hn.row], h_row=hn.row,
        h_api=h_api, h_kind=h_kind, h_start=h_start, h_end=h_end, h_gap=h_gap, h_own=h_own,
        h_ret=h_ret, h_readback=h_readback, h_fixed=hn.fixed,
        d_block=d["block"], d_first=d_first, d_chain=d_chain, d_kind=d["kind"], d_row=d["row"],
        d_start=d_start, d_end=d_end, d_dur=d_end - d_start, d_queue=d_queue, d_lat=lat,
        d_pin=d_pin, d_launch=d_launch, d_issue=launched, d_fixed=d["fixed"], d_before=d_before, d_device=d["device"],
        d_stream=d["stream"], d_name=d["name"], d_copy_kind=d["copy_kind"], d_bytes=d["bytes"],
        w_src=w_src, w_dst=w_dst, w_kind=w_kind, x_src=x_src, x_dst=x_dst, counts=counts, latencies=latencies,
    )


READBACK_MAX_BYTES = 1 << 20
# What a host-wait edge is: a synchronize (or a copy that waits for earlier work), a copy
# call waiting for its own copy, a call waiting for room in a full launch queue.
WAIT_SYNC, WAIT_COPY, WAIT_QUEUE = 0, 1, 2


def _timed_waits(
    hn: Any, rt: Any, d: dict[str, np.ndarray], d_launch: np.ndarray, launched: np.ndarray, d_end: np.ndarray,
    h_start: np.ndarray, h_end: np.ndarray, hkey: np.ndarray, own_typ: np.ndarray, unmatched: np.ndarray,
    queued_kind: np.ndarray,
) -> tuple[waits.TimedWaits, waits.TimedWaits, np.ndarray]:
    """Waits the trace shows only by their timing (graph/waits.py): synchronizes no record scopes,
    and calls blocked on a full launch queue; each waits for the task whose end released it.
    Also each call's usual cost (waits.queue_waits)."""
    if not (unmatched.any() or queued_kind.any()) or len(d_end) == 0:
        return waits.TimedWaits.none(), waits.TimedWaits.none(), h_end - h_start
    d_group, _ = group_codes(d["block"], d["pid"])
    h_group = _group_of(hn.block, rt.pid[hn.row], d["block"], d["pid"], d_group)
    timed = waits.sync_waits(h_start, h_end, unmatched & (h_group >= 0), own_typ, h_group, d_group, launched, d_end)
    qgroup, _ = group_codes(d["block"], d["pid"], d["device"])
    pd_code, _ = group_codes(d["pid"], d["device"])
    h_queue, h_pd, h_seen = _call_queues(d_launch, qgroup, pd_code, d_group, h_group)
    full, usual = waits.queue_waits(h_start, h_end, queued_kind, hkey, h_queue, h_pd, h_seen, qgroup, launched, d_end)
    return timed, full, usual


def _call_queues(
    d_launch: np.ndarray, qgroup: np.ndarray, pd_code: np.ndarray, d_group: np.ndarray, h_group: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per host node: the launch queue it issues to (a task's block, process and device), that
    queue's process and device, and whether the capture holds the call's operation. A call
    whose operation is not in the capture issues to its process's only device in the block
    (-1 when the process used several)."""
    n = len(h_group)
    h_queue = np.full(n, -1, np.int64)
    h_pd = np.full(n, -1, np.int64)
    has = np.flatnonzero(d_launch >= 0)
    h_queue[d_launch[has]] = qgroup[has]
    h_pd[d_launch[has]] = pd_code[has]
    seen = h_queue >= 0
    if len(d_group):
        # (block, process) groups with a single device: their queue
        lo = np.full(int(d_group.max()) + 1, np.iinfo(np.int64).max, np.int64)
        hi = np.full(int(d_group.max()) + 1, -1, np.int64)
        np.minimum.at(lo, d_group, qgroup)
        np.maximum.at(hi, d_group, qgroup)
        pdq = np.zeros(int(qgroup.max()) + 1, np.int64)
        pdq[qgroup] = pd_code
        miss = np.flatnonzero(~seen & (h_group >= 0))
        single = lo[h_group[miss]] == hi[h_group[miss]]
        h_queue[miss[single]] = lo[h_group[miss[single]]]
        h_pd[miss[single]] = pdq[lo[h_group[miss[single]]]]
    return h_queue, h_pd, seen


def _group_of(block: np.ndarray, pid: np.ndarray, d_block: np.ndarray, d_pid: np.ndarray,
              d_group: np.ndarray) -> np.ndarray:
    """Per (block, pid) query: its code among the tasks' (block, pid) groups, -1: none."""
    key = d_block.astype(np.int64) * (1 << 32) + (d_pid & 0xFFFFFFFF)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    q = block.astype(np.int64) * (1 << 32) + (pid & 0xFFFFFFFF)
    pos = np.minimum(np.searchsorted(sk, q), max(len(sk) - 1, 0))
    hit = (len(sk) > 0) & (sk[pos] == q) if len(sk) else np.zeros(len(q), bool)
    return np.where(hit, d_group[order[pos]], -1) if len(sk) else np.full(len(q), -1, np.int64)


def _distinct(ids: np.ndarray) -> int:
    return int(len(np.unique(ids)))


def _distinct_sum(ids: np.ndarray, values: np.ndarray) -> int:
    """Sum of values over distinct ids (the first value of each)."""
    _, first = np.unique(ids, return_index=True)
    return int(values[first].sum())


def _first_task_of_call(block: np.ndarray, call: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Per task: the earliest-starting task of its launch call (graph launches start many)."""
    out = np.ones(len(call), bool)
    has = np.flatnonzero(call >= 0)
    if len(has) == 0:
        return out
    order = has[np.lexsort((start[has], call[has], block[has]))]
    same = np.r_[False, (call[order][1:] == call[order][:-1]) & (block[order][1:] == block[order][:-1])]
    out[order[same]] = False
    return out


def _waits(
    data: TraceData, rt: Any, hn: Any, h_wait: np.ndarray, h_kind: np.ndarray, h_start: np.ndarray,
    d: dict[str, np.ndarray], d_chain: np.ndarray, d_first: np.ndarray, launched: np.ndarray,
    node_of: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """(task, call) wait edges: for each blocking call, the last task it waits for on each
    stream it waits on (stream order makes that task the last of everything before)."""
    counts = {"syncs_without_stream": 0, "event_syncs_without_record": 0}
    n_h = len(h_start)
    # Synchronization records name the stream (and device) of stream/event syncs.
    rec_stream = np.full(n_h, -1, np.int64)
    rec_device = np.full(n_h, -1, np.int64)
    try:
        sy = data.sync()
    except Unavailable:
        sy = None
    if sy is not None and len(sy) and n_h:
        kind_of_api, _ = api_tables(data.runtime_api_names())
        call = data.cached("graph_calls:sync", lambda: match_calls(
            sy.pid, sy.corr, rt, np.isin(kind_of_api[rt.api], (SYNC, EVENT, COPY))))
        ok = np.flatnonzero(call >= 0)
        by_row = np.argsort(call[ok], kind="stable")
        rows_sorted = call[ok][by_row]
        rec = ok[by_row]
        # Each selected runtime row (nested calls too) that a record names gives its node
        # the record's stream and device.
        pos = np.minimum(np.searchsorted(rows_sorted, hn.member_row), max(len(rows_sorted) - 1, 0))
        hit = np.flatnonzero((len(rows_sorted) > 0) & (rows_sorted[pos] == hn.member_row)) \
            if len(rows_sorted) else np.empty(0, np.int64)
        r = rec[pos[hit]]
        node = hn.member_node[hit]
        valid = (sy.stream[r] >= 0) & (sy.stream[r] < INVALID_STREAM)
        rec_stream[node[valid]] = sy.stream[r][valid]
        dev_ok = sy.device[r] >= 0
        rec_device[node[dev_ok]] = sy.device[r][dev_ok]
    # Per (block, pid) the device chains; per chain, launch times made non-decreasing.
    src_parts: list[np.ndarray] = []
    dst_parts: list[np.ndarray] = []
    own_parts: list[np.ndarray] = []
    if len(d_chain) == 0 or n_h == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool), counts
    chains = np.flatnonzero(d_first)
    chain_block = d["block"][chains]
    chain_pid = d["pid"][chains]
    chain_dev = d["device"][chains]
    chain_stream = d["stream"][chains]
    chain_lo = chains
    ln = launched.copy()
    ln = _running_max_by_chain(ln, d_first)
    h_pid = rt.pid[hn.row]
    h_block = hn.block
    # Calls waiting on a whole device or one stream: expand (call, chain) pairs.
    want = np.flatnonzero((h_wait == WAIT_DEVICE) | (h_wait == WAIT_STREAM) | (h_wait == WAIT_EVENT))
    if len(want):
        # chains of the same block and process
        ck = chain_block * (1 << 24) + (chain_pid & 0xFFFFFF)
        corder = np.argsort(ck, kind="stable")
        cks = ck[corder]
        hk = h_block[want] * (1 << 24) + (h_pid[want] & 0xFFFFFF)
        lo = np.searchsorted(cks, hk, "left")
        hi = np.searchsorted(cks, hk, "right")
        pos, which = expand_ranges(lo, hi)
        call_i = want[which]
        ch = corder[pos]
        wk = h_wait[call_i]
        n_chains_of_call = (hi - lo)[which]
        stream_known = rec_stream[call_i] >= 0
        match_stream = stream_known & (chain_stream[ch] == rec_stream[call_i]) & (
            (rec_device[call_i] < 0) | (chain_dev[ch] == rec_device[call_i]))
        single = n_chains_of_call == 1
        dev_ok = (rec_device[call_i] < 0) | (chain_dev[ch] == rec_device[call_i])
        keep = np.where(wk == WAIT_DEVICE, dev_ok,
                        np.where(stream_known, match_stream, single))
        # Calls with no usable scope are counted once each.
        covered = np.zeros(n_h, bool)
        covered[call_i[keep]] = True
        lost = want[~covered[want]]
        counts["syncs_without_stream"] = _distinct(hn.row[lost[h_wait[lost] == WAIT_STREAM]])
        counts["event_syncs_without_record"] = _distinct(hn.row[lost[h_wait[lost] == WAIT_EVENT]])
        counts["device_syncs_without_work"] = _distinct(hn.row[lost[h_wait[lost] == WAIT_DEVICE]])
        call_i, ch = call_i[keep], ch[keep]
        # last task of the chain launched before the call started
        last = last_launched_before(ln, d_first, chain_lo[ch], h_start[call_i])
        has = last >= 0
        src_parts.append(last[has])
        dst_parts.append(call_i[has])
        own_parts.append(np.zeros(int(has.sum()), bool))
    # Copy calls that block, per the CUDA runtime's synchronization rules: a copy to host
    # memory (synchronous, or into pageable memory) or a synchronous copy from pinned memory
    # returns when the copy is done; a copy from pageable memory to the device first waits
    # for the stream's earlier work and returns once the data is staged; device-to-device
    # copies do not block.
    is_copy_task = d["kind"] == TASK_COPY
    own_node = np.where(is_copy_task & (d["call"] >= 0) & ~d["fixed"], node_of(d["block"], d["call"]), -1)
    own = np.flatnonzero(own_node >= 0)
    if len(own):
        n = own_node[own]
        sync_api = h_wait[n] == WAIT_OWN_COPY
        ck = d["copy_kind"][own]
        to_host = np.isin(ck, TO_HOST)
        from_host = np.isin(ck, FROM_HOST)
        src_pageable = d["src_pageable"][own]
        dst_pageable = d["dst_pageable"][own]
        waits_own = (to_host & (sync_api | dst_pageable)) | (from_host & sync_api & ~src_pageable) \
            | (~to_host & ~from_host & ~np.isin(ck, DEVICE_ONLY) & sync_api)
        src_parts.append(own[waits_own])
        dst_parts.append(n[waits_own])
        own_parts.append(np.ones(int(waits_own.sum()), bool))
        drains = from_host & src_pageable & sync_api & ~d_first[own]
        prev = own[drains] - 1
        before = ln[prev] < h_start[n[drains]]
        src_parts.append(prev[before])
        dst_parts.append(n[drains][before])
        own_parts.append(np.ones(int(before.sum()), bool))
    if not src_parts:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, bool), counts
    return np.concatenate(src_parts), np.concatenate(dst_parts), np.concatenate(own_parts), counts


def _running_max_by_chain(values: np.ndarray, first: np.ndarray) -> np.ndarray:
    from nsys_llm_explainer.graph.scan import segmented_cummax

    return segmented_cummax(values, first)


