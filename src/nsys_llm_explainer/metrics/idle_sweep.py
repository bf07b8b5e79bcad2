"""Split every GPU idle gap's time by what covers it, in precedence order.

Each nanosecond of idle time on a device (a hole in the union of its kernels, inside its
kernel window) gets the first cause in this order that covers it:

1. transfer: a memcpy or memset runs on the device.
2. communication: an owning process is inside a host-side communication call (an NVTX/MPI
   range named like NCCL, MPI, gloo or c10d collectives, see COMM_RANGE).
3. sync_wait: an owning process is blocked in a synchronizing call (sync.py's blocking
   calls, and copy calls that block the host: synchronous cudaMemcpy* and async copies to or
   from pageable memory), or is refilling the GPU right after such a call returned (the
   launch call that follows on the same thread within REFILL_GRACE_NS of the return).
4. launch_bound: a launch call of an owning process is in flight.
5. capture_edge: the time lies outside the owning processes' host activity window (first to
   last CUDA API call), where the host is not visible.
6. host_other: the host is visible and in none of the calls above (host work).

The owning processes of a device are the pids of the kernels that ran on it. Causes of a
device sum to its idle time to the nanosecond. A gap's listed cause is the one covering most
of it.

The kernel that ends each gap is checked first. Launched after the gap began, the host was
late, and the order above says what it was doing. Launched before the gap began (queued),
the GPU had work and waited on a device-side dependency: a copy or memset ahead of it on its
own stream (found and reported as copy_ahead; its time is transfer by rule 1), or a
cross-stream or cross-device event. On a device that runs communication kernels, the time of
a queued gap that no copy covers goes to communication, not to the host (dependency_ns): the
host was ahead of the GPU there, so what the host was doing did not make it wait, and the
producer the GPU waited for is a collective or its dependency. Without communication kernels
the producer cannot be named and the order above is kept (the diagnosis then lowers its
confidence).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import distinct_few, rows_by_value
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.metrics.communication import comm_mask
from nsys_llm_explainer.metrics.gpu_idle import copy_union, device_busy
from nsys_llm_explainer.metrics.launch_pairs import launch_api_mask
from nsys_llm_explainer.metrics.nvtx_ranges import name_mask
from nsys_llm_explainer.metrics.sync import sync_kinds
from nsys_llm_explainer.trace.data import TraceData, Unavailable

CAUSES = ("transfer", "communication", "sync_wait", "launch_bound", "capture_edge", "host_other")
TRANSFER, COMMUNICATION, SYNC_WAIT, LAUNCH_BOUND, CAPTURE_EDGE, HOST_OTHER = range(6)
HOST_SIDE = (SYNC_WAIT, LAUNCH_BOUND, HOST_OTHER)  # idle the host could have prevented
REFILL_GRACE_NS = 20_000
NO_REFILL = -1
COMM_RANGE = re.compile(
    r"^(nccl[A-Z]\w*|nccl:\w+|c10d::\w+|gloo:\w+|MPI_\w+|ProcessGroup\w*[:.]\w+|"
    r"record_param_comms|(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|"
    r"barrier)(_\w+)?)\b",
    re.IGNORECASE,
)
# Async copies that block the host: to or from pageable host memory (CUPTI memory kind 0).
PAGEABLE = 0


@dataclass(frozen=True)
class GapCauses:
    device_id: int
    owners: np.ndarray  # pids whose kernels ran on the device
    gap_start: np.ndarray
    gap_end: np.ndarray
    cause_ns: np.ndarray  # (len(CAUSES), gaps): ns of each gap per cause
    segments: tuple[tuple[np.ndarray, np.ndarray], ...]  # per cause: disjoint sorted intervals
    dependency_ns: int  # queued idle time moved from host-side causes to communication
    refill_ns: np.ndarray  # per gap: gap end - latest blocking-call return in it; NO_REFILL
    next_kernel: np.ndarray  # index in kernels() of the kernel that ends the gap
    queued: np.ndarray  # that kernel's launch call began before the gap
    copy_ahead: np.ndarray  # queued, and a copy/memset on its stream ran during the gap

    @property
    def length(self) -> np.ndarray:
        return self.gap_end - self.gap_start

    @property
    def cause(self) -> np.ndarray:
        """Per gap, the cause covering most of it (ties: the earlier cause)."""
        if self.cause_ns.shape[1] == 0:
            return np.empty(0, np.int64)
        return np.argmax(self.cause_ns, axis=0).astype(np.int64)


@dataclass(frozen=True)
class HostRows:
    """CUDA API rows grouped once for every device's classification."""

    by_pid: dict[int, np.ndarray]  # pid -> its rows in runtime(), ascending
    blocking: np.ndarray  # per row: a call that blocks the host until the GPU catches up
    launching: np.ndarray  # per row: a launch call
    refill_end: np.ndarray  # per row: for blocking calls, end of the refill launch (else end)

    @staticmethod
    def of(data: TraceData) -> HostRows:
        return data.cached("host_rows", lambda: HostRows._build(data))

    @staticmethod
    def _build(data: TraceData) -> HostRows:
        rt = data.runtime()
        names = data.runtime_api_names()
        blocking = sync_kinds(names)[rt.api] == 1
        blocking |= _pageable_copy_calls(data)
        launching = launch_api_mask(names)[rt.api]
        return HostRows(dict(rows_by_value(rt.pid)), blocking, launching,
                        _refill_end(data, blocking, launching))

    def rows_of(self, pids: np.ndarray) -> np.ndarray:
        parts = [self.by_pid[p] for p in pids.tolist() if p in self.by_pid]
        if len(parts) == 1:
            return parts[0]
        return np.sort(np.concatenate(parts)) if parts else np.empty(0, np.int64)


def _pageable_copy_calls(data: TraceData) -> np.ndarray:
    """Per runtime row: the call started a copy to or from pageable memory (it blocks)."""
    rt = data.runtime()
    out = np.zeros(len(rt), dtype=bool)
    try:
        mc = data.memcpy()
    except Unavailable:
        return out
    pageable = (mc.src_kind == PAGEABLE) | (mc.dst_kind == PAGEABLE)
    if not pageable.any() or len(rt) == 0:
        return out
    from nsys_llm_explainer.analysis.join import match_calls

    rows = match_calls(mc.pid[pageable], mc.corr[pageable], rt)
    out[rows[rows >= 0]] = True
    return out


def _refill_end(data: TraceData, blocking: np.ndarray, launching: np.ndarray) -> np.ndarray:
    """Per row: the end of the launch call that follows a blocking call on the same thread
    within REFILL_GRACE_NS of its return (the host refilling the GPU), else the row's end."""
    rt = data.runtime()
    out = rt.end.copy()
    if len(rt) < 2 or not blocking.any():
        return out
    order = np.lexsort((rt.start, rt.tkey))
    cur, nxt = order[:-1], order[1:]
    ok = (
        blocking[cur]
        & (rt.tkey[cur] == rt.tkey[nxt])
        & launching[nxt]
        & (rt.start[nxt] - rt.end[cur] <= REFILL_GRACE_NS)
    )
    out[cur[ok]] = np.maximum(rt.end[cur[ok]], rt.end[nxt[ok]])
    return out


def _comm_ranges(data: TraceData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pid, start, end) of ended NVTX ranges named like host-side communication calls."""
    empty = np.empty(0, np.int64)
    try:
        nv = data.nvtx()
    except Unavailable:
        return empty, empty, empty
    is_comm = name_mask(data, COMM_RANGE, anchored=True)
    sel = (nv.end >= 0) & is_comm[nv.name] if len(nv) else np.zeros(0, dtype=bool)
    return nv.pid[sel], nv.start[sel], nv.end[sel]


def _next_kernels(
    data: TraceData, device: int, g0: np.ndarray, g1: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first kernel starting at each gap end, whether it was launched before the gap,
    and whether a copy/memset on its stream ran during the gap (the work ahead of it).

    Kernels that start at the same instant are ordered by (end, pid, corr) and the gap counts
    as "queued" when any of them was launched before it, so the answer does not depend on
    row order.
    """
    k = data.kernels()
    mine = np.flatnonzero(k.device == device)
    mine = mine[np.lexsort((k.corr[mine], k.pid[mine], k.end[mine], k.start[mine]))]
    none = np.zeros(len(g1), dtype=bool)
    if len(g1) == 0 or len(mine) == 0:
        return g1, none, none
    starts = k.start[mine]
    pos = np.minimum(np.searchsorted(starts, g1), len(mine) - 1)
    nxt = mine[pos]
    call = kernel_launch_index(data)[mine]
    rt_start = data.runtime().start
    never = np.iinfo(np.int64).max
    launched = np.where(call >= 0, rt_start[np.maximum(call, 0)], never) if len(rt_start) else np.full(len(mine), never)
    first_of_group = np.flatnonzero(np.r_[True, starts[1:] != starts[:-1]])
    group_min = np.minimum.reduceat(launched, first_of_group)
    group_of = np.searchsorted(first_of_group, pos, side="right") - 1
    queued = group_min[group_of] < g0
    return nxt, queued, queued & _copy_ahead(data, device, k.stream[nxt], g0, g1)


def _copy_ahead(
    data: TraceData, device: int, stream: np.ndarray, g0: np.ndarray, g1: np.ndarray
) -> np.ndarray:
    """Per gap: a copy or memset on `stream` of the device ended inside the gap."""
    out = np.zeros(len(g0), dtype=bool)
    for loader in (data.memcpy, data.memset):
        try:
            c = loader()
        except Unavailable:
            continue
        mine = c.device == device
        key = c.stream[mine]
        ends = c.end[mine]
        for s in np.unique(stream).tolist():
            e = np.sort(ends[key == s])
            if len(e) == 0:
                continue
            sel = stream == s
            # Some end in (g0, g1]: the copy finished during the gap, just before the kernel.
            hit = np.searchsorted(e, g1[sel], side="right") > np.searchsorted(e, g0[sel], side="right")
            out[sel] |= hit
    return out


def _union_of_rows(rows: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return intervals.merge(start[rows], end[rows])


def classify(
    data: TraceData, busy_start: np.ndarray, busy_end: np.ndarray, device: int, owners: np.ndarray,
    host: HostRows, comm: tuple[np.ndarray, np.ndarray, np.ndarray], comm_device: bool = False,
) -> GapCauses:
    g0, g1 = busy_end[:-1], busy_start[1:]
    rt = data.runtime()
    mine = host.rows_of(owners)
    blocking = mine[host.blocking[mine]]
    launching = mine[host.launching[mine]]
    sources: list[tuple[np.ndarray, np.ndarray]] = [
        copy_union(data, "device", device),
        intervals.merge(comm[1][np.isin(comm[0], owners)], comm[2][np.isin(comm[0], owners)]),
        intervals.merge(rt.start[blocking], host.refill_end[blocking]),
        _union_of_rows(launching, rt.start, rt.end),
    ]
    if len(mine):
        hs, he = np.array([rt.start[mine].min()]), np.array([rt.end[mine].max()])
    else:
        hs, he = np.empty(0, np.int64), np.empty(0, np.int64)
    left = (g0, g1)
    segments: list[tuple[np.ndarray, np.ndarray]] = []
    for us, ue in sources:
        segments.append(intervals.intersect(*left, us, ue))
        left = intervals.subtract(*left, us, ue)
    segments.append(intervals.subtract(*left, hs, he))  # capture_edge
    segments.append(intervals.intersect(*left, hs, he))  # host_other
    nxt, queued, ahead = _next_kernels(data, device, g0, g1)
    moved = 0
    if queued.any() and comm_device:
        segments, moved = _queued_to_communication(segments, g0[queued], g1[queued])
    cause_ns = np.zeros((len(CAUSES), len(g0)), np.int64)
    for i, (s, e) in enumerate(segments):
        cause_ns[i] = intervals.overlap_with_union(g0, g1, s, e)
    sync_end = _in_flight_end(rt.start[blocking], rt.end[blocking], g1)
    refill = np.where((sync_end >= g0) & (sync_end < g1), g1 - sync_end, NO_REFILL)
    return GapCauses(device, owners, g0, g1, cause_ns.astype(np.int64), tuple(segments), moved,
                     refill.astype(np.int64), nxt, queued, ahead)


def _queued_to_communication(
    segments: list[tuple[np.ndarray, np.ndarray]], q0: np.ndarray, q1: np.ndarray
) -> tuple[list[tuple[np.ndarray, np.ndarray]], int]:
    """Host-side time inside queued gaps goes to communication (see the module docstring)."""
    qs, qe = intervals.merge(q0, q1)
    out = list(segments)
    moved_s, moved_e = [out[COMMUNICATION][0]], [out[COMMUNICATION][1]]
    moved = 0
    for c in HOST_SIDE:
        s, e = out[c]
        ms_, me_ = intervals.intersect(s, e, qs, qe)
        moved += int((me_ - ms_).sum())
        moved_s.append(ms_)
        moved_e.append(me_)
        out[c] = intervals.subtract(s, e, qs, qe)
    out[COMMUNICATION] = intervals.merge(np.concatenate(moved_s), np.concatenate(moved_e))
    return out, moved


def _in_flight_end(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Latest end among calls that started at or before each t (-1 when none started)."""
    if len(start) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    order = np.argsort(start, kind="stable")
    run_max = np.maximum.accumulate(end[order])
    i = np.searchsorted(start[order], t, side="right") - 1
    return np.where(i >= 0, run_max[np.maximum(i, 0)], -1)


def gap_causes(data: TraceData) -> dict[int, GapCauses]:
    """Per device, every idle gap split by cause (cached; steps and timeline reuse it)."""

    def build() -> dict[int, GapCauses]:
        k = data.kernels()
        host = HostRows.of(data)
        comm = _comm_ranges(data)
        is_comm = comm_mask(data)
        out: dict[int, GapCauses] = {}
        for dev, busy in device_busy(data).items():
            mine = k.device == dev
            owners = distinct_few(k.pid[mine])
            out[dev] = classify(data, busy.busy_start, busy.busy_end, dev, owners, host, comm,
                                bool(is_comm[mine].any()))
        return out

    return data.cached("gap_causes", build)


def gap_at(causes: GapCauses, t0: int, t1: int) -> int:
    """Index of the longest gap overlapping [t0, t1] (clipped to it), or -1."""
    lo = int(np.searchsorted(causes.gap_end, t0, side="right"))
    hi = int(np.searchsorted(causes.gap_start, t1, side="left"))
    if hi <= lo:
        return -1
    clipped = np.minimum(causes.gap_end[lo:hi], t1) - np.maximum(causes.gap_start[lo:hi], t0)
    return lo + int(np.argmax(clipped))
