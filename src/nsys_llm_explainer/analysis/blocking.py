"""Host calls that block the host until the GPU catches up: synchronize calls, the CUDA API
rows grouped once by what they do (HostRows), and read-backs.

- Which CUDA/HIP API calls synchronize the host with the GPU (sync_kinds): blocking calls
  (device, stream and event synchronize, synchronous memcpy) apart from non-blocking waits and
  queries.
- HostRows: per runtime row, a call that blocks the host (a blocking synchronize, or a copy to
  or from pageable memory), a launch call, the end of the refill launch after a blocking call
  (within REFILL_GRACE_NS of its return), a launch made after a stream wait; the idle sweep
  and the host patterns read them.
- Read-backs: small device-to-host copies that make the host wait for the GPU's queue.

A read-back is a device-to-host copy of at most READBACK_BYTES whose call blocks the host
(a synchronous cudaMemcpy*, or an async copy into pageable memory, which returns only once
the copy has run), or that a blocking synchronize follows on the same thread within
READBACK_GAP_NS of the call's return: what `.item()`, `.cpu()`, `.tolist()` or a Python `if`
on a tensor compile to. The host is blocked from the call's start to the return of the call
(or of the synchronize after it).

For each read-back, on the copy's device:
- host_blocked_ns: how long the host was blocked;
- busy_ns: the device's busy time while the host was blocked (costs the GPU nothing);
- idle_during_ns: idle time while blocked with nothing queued (idle_sweep's sync_wait);
- queued_during_ns: idle time while blocked with the next work already queued and waiting on
  something else (idle_sweep's GapCauses.waiting_overlap: device_wait, or a collective): the
  read-back waits for it too;
- idle_after_ns: when the device went idle while the host was blocked (the read-back drained
  its queue), the idle time from the return until the device's next work during which the
  host had not launched it yet (idle_sweep's launch_bound and host_other): the host queued
  nothing while it waited, so this idle time follows from the read-back, whatever the host
  then does. Time the next work waited on something else (already queued) is not counted.

The GPU time a read-back costs is idle_during_ns + idle_after_ns (each device's union, so
nothing counts twice). Read-backs are grouped by where they come from: the outermost range on
the calling thread below the step (not a step range, nor a range at least CONTAINER_SHARE of
the device's window long), the operator called (that range when it is an operator, else the
range right below it: `## sparse_data_dist ##` > `aten::to`), and the copy size."""

from __future__ import annotations

import re

import numpy as np

from nsys_llm_explainer.analysis import intervals, nvtx
from nsys_llm_explainer.analysis.groups import distinct_few, rows_by_value, sparse_rows
from nsys_llm_explainer.analysis.join import cached_range_index, launch_api_mask, match_calls
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.columns import narrow
from nsys_llm_explainer.trace.data import TraceData, Unavailable

READBACK_BYTES = 1024
READBACK_GAP_NS = 50_000
CONTAINER_SHARE = 0.5
D2H = 2
PAGEABLE = 0


BLOCKING_APIS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize",  # ROCm (Kineto)
})
NON_BLOCKING_APIS = frozenset({
    "cudaStreamWaitEvent", "cudaEventQuery", "cudaStreamQuery",
    "cuStreamWaitEvent", "cuEventQuery", "cuStreamQuery", "cudaStreamWaitValue32",
    "cuStreamWaitValue32", "cuStreamWaitValue64",
    "hipStreamWaitEvent", "hipEventQuery", "hipStreamQuery",
})


# cudaMemcpy, cudaMemcpy2D, cudaMemcpyToSymbol, cuMemcpyDtoH ... but not the *Async forms.
_SYNC_MEMCPY = re.compile(r"^(cu(da)?|hip)Memcpy\w*$")


def classify(api: str) -> str | None:
    """'blocking', 'non_blocking', or None for APIs that are not synchronization."""
    if api in BLOCKING_APIS:
        return "blocking"
    if _SYNC_MEMCPY.match(api) and "Async" not in api:
        return "blocking"
    if api in NON_BLOCKING_APIS:
        return "non_blocking"
    return None


def sync_kinds(api_names: list[str]) -> np.ndarray:
    """Per API code: 1 blocking, 2 non-blocking, 0 other."""
    kinds = {"blocking": 1, "non_blocking": 2, None: 0}
    return np.array([kinds[classify(n)] for n in api_names], dtype=np.int64)


REFILL_GRACE_NS = 20_000


@frozen
class HostRows:
    """CUDA API rows grouped once for every device's classification."""

    by_pid: dict[int, np.ndarray]  # pid -> its rows in runtime(), ascending
    blocking: np.ndarray  # per row: a call that blocks the host until the GPU catches up
    launching: np.ndarray  # per row: a launch call
    refill_end: np.ndarray  # per row: for blocking calls, end of the refill launch (else end)
    # launches made after a stream wait on their thread (since its last launch), as
    # groups.sparse_rows keeps a per-row mask: read with marked_at()
    after_wait: np.ndarray

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
        by_pid = {pid: narrow(rows) for pid, rows in rows_by_value(rt.pid)}
        return HostRows(by_pid, blocking, launching,
                        _refill_end(data, blocking, launching), sparse_rows(_after_wait(data, launching)))

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
    wanted = set(distinct_few(rt.tkey[blocking]).tolist())
    for tkey, order in rows_by_value(rt.tkey):
        if tkey not in wanted:
            continue
        # the thread's rows in (start, row) order, as np.lexsort((start, tkey)) has them
        start = rt.start[order]
        if len(order) > 1 and not bool((start[1:] >= start[:-1]).all()):
            order = order[np.argsort(start, kind="stable")]
        cur, nxt = order[:-1], order[1:]
        ok = blocking[cur] & launching[nxt] & (rt.start[nxt] - rt.end[cur] <= REFILL_GRACE_NS)
        out[cur[ok]] = np.maximum(rt.end[cur[ok]], rt.end[nxt[ok]])
    return out


STREAM_WAIT = re.compile(r"StreamWaitEvent|StreamWaitValue")


def _after_wait(data: TraceData, launching: np.ndarray) -> np.ndarray:
    """Per row: a launch call made after its thread issued a stream wait on an event since its
    previous launch (the work it launches waits on that event)."""
    rt = data.runtime()
    out = np.zeros(len(rt), dtype=bool)
    names = data.runtime_api_names()
    waits = np.array([STREAM_WAIT.search(n) is not None for n in names] or [False])
    is_wait = waits[rt.api] if len(rt) else np.zeros(0, dtype=bool)
    if not is_wait.any():
        return out
    wanted = set(distinct_few(rt.tkey[is_wait]).tolist())
    for tkey, order in rows_by_value(rt.tkey):
        if tkey not in wanted:
            continue
        start = rt.start[order]
        if len(order) > 1 and not bool((start[1:] >= start[:-1]).all()):
            order = order[np.argsort(start, kind="stable")]
        launch = launching[order]
        # per row: the number of launches before it on the thread; a wait and the launch after
        # it have the same count when no launch lies between them
        seen = np.cumsum(launch) - launch
        wait_at = np.flatnonzero(is_wait[order])
        if not len(wait_at):
            continue
        marked = np.zeros(int(seen[-1]) + 2, dtype=bool)
        marked[seen[wait_at]] = True
        out[order[launch]] = marked[seen[launch]]
    return out


@frozen
class Calls:
    """One row per read-back."""

    call: np.ndarray  # runtime() row of the copy call
    copy: np.ndarray  # memcpy() row
    device: np.ndarray
    bytes: np.ndarray
    pageable: np.ndarray  # bool: into pageable host memory
    followed: np.ndarray  # bool: a blocking synchronize follows
    sync: np.ndarray  # runtime() row of that synchronize, or -1
    start: np.ndarray  # host blocked from
    end: np.ndarray  # to


def find(data: TraceData, blocking: np.ndarray) -> Calls | None:
    """The read-backs (module docstring); `blocking`: per runtime row, the call blocks the
    host (idle_sweep HostRows.blocking). None without memcpy records."""
    try:
        mc = data.memcpy()
    except Unavailable:
        return None
    rt = data.runtime()
    tiny = np.flatnonzero((mc.bytes <= READBACK_BYTES) & (mc.copy_kind == D2H))
    call = match_calls(mc.pid[tiny], mc.corr[tiny], rt)
    ok = call >= 0
    tiny, call = tiny[ok], call[ok]
    empty = np.empty(0, np.int64)
    if len(call) == 0:
        return Calls(empty, empty, empty, empty, empty.astype(bool), empty.astype(bool), empty, empty, empty)
    order = np.lexsort((rt.start, rt.tkey))
    pos = np.empty(len(rt), dtype=np.int64)
    pos[order] = np.arange(len(rt))
    nxt = order[np.minimum(pos[call] + 1, len(rt) - 1)]
    followed = ((pos[call] + 1 < len(rt)) & (rt.tkey[nxt] == rt.tkey[call]) & blocking[nxt]
                & (rt.start[nxt] - rt.end[call] <= READBACK_GAP_NS))
    hit = blocking[call] | followed
    tiny, call, nxt, followed = tiny[hit], call[hit], nxt[hit], followed[hit]
    end = np.where(followed, rt.end[nxt], rt.end[call])
    return Calls(call, tiny, mc.device[tiny], mc.bytes[tiny], mc.dst_kind[tiny] == PAGEABLE, followed,
                 np.where(followed, nxt, -1), rt.start[call], end)


def find_blocking(data: TraceData) -> Calls | None:
    """find() with the calls that block the host (HostRows.blocking), built once for every
    reader (host_patterns, and idle_causes' draining calls)."""
    return data.cached("readbacks", lambda: find(data, HostRows.of(data).blocking))


def _overlap(s: np.ndarray, e: np.ndarray, seg: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return intervals.overlap_with_union(s, e, *seg) if len(s) else np.empty(0, np.int64)


@frozen
class Cost:
    """Per read-back figures (module docstring) and each device's union of the GPU cost."""

    busy_ns: np.ndarray
    idle_during_ns: np.ndarray
    queued_during_ns: np.ndarray
    idle_after_ns: np.ndarray
    after_end: np.ndarray  # end of the idle gap the call returned into (its end when none)
    device_cost_ns: dict[int, int]


def cost(data: TraceData, rb: Calls, causes: dict, busy: dict, sync_wait: int,  # type: ignore[type-arg]
         host_late: tuple[int, ...]) -> Cost:
    """The per-read-back figures. causes: idle_sweep.gap_causes(data); busy: gpu_idle
    device_busy(data); sync_wait: the cause index in GapCauses.segments (the idle time with
    work queued is GapCauses.waiting_overlap);
    host_late: the causes where the host had not launched the next work (launch_bound,
    host_other): the part of the time after the return the read-back is charged with."""
    n = len(rb.call)
    b, idle, queued, after = (np.zeros(n, np.int64) for _ in range(4))
    after_end = rb.end.copy()
    cost_of: dict[int, int] = {}
    for dev in np.unique(rb.device).tolist():
        gc = causes.get(int(dev))
        sel = np.flatnonzero(rb.device == dev)
        if gc is None:
            continue
        s, e = rb.start[sel], rb.end[sel]
        db = busy[int(dev)]
        b[sel] = _overlap(s, e, (db.busy_start, db.busy_end))
        idle[sel] = _overlap(s, e, gc.segments[sync_wait])
        queued[sel] = gc.waiting_overlap(s, e)
        gi = np.searchsorted(gc.gap_start, e, "right") - 1
        ok = (gi >= 0) & (len(gc.gap_start) > 0)
        gi = np.maximum(gi, 0)
        inside = ok & (e < gc.gap_end[gi]) & (gc.gap_start[gi] >= s) if len(gc.gap_start) else ok
        a_end = np.where(inside, gc.gap_end[gi], e) if len(gc.gap_start) else e
        after_end[sel] = a_end
        late = intervals.merge(np.concatenate([gc.segments[c][0] for c in host_late]),
                               np.concatenate([gc.segments[c][1] for c in host_late]))
        after[sel] = _overlap(e, a_end, late)
        during = intervals.intersect(*intervals.merge(s, e), *gc.segments[sync_wait])
        after_u = intervals.merge(e[inside], a_end[inside]) if len(gc.gap_start) else (e[:0], e[:0])
        after_u = intervals.intersect(*after_u, *late)
        total = intervals.merge(np.concatenate((during[0], after_u[0])), np.concatenate((during[1], after_u[1])))
        cost_of[int(dev)] = int((total[1] - total[0]).sum())
    return Cost(b, idle, queued, after, after_end, dict(sorted(cost_of.items())))


def origins(data: TraceData, rb: Calls, skip_names: set[str],
            window_ns: int) -> tuple[list[str | None], list[str | None]]:
    """Per read-back: (outermost range below the step, operator called) around its call
    (call_origins)."""
    return call_origins(data, rb.call, skip_names, window_ns)


def call_origins(data: TraceData, calls: np.ndarray, skip_names: set[str],
                 window_ns: int) -> tuple[list[str | None], list[str | None]]:
    """Per runtime row in `calls`: (outermost range below the step, the operator called) around
    it on its thread, by normalized name (None: no range). The operator is the outermost range
    when it is one (a name with `::`), else the range right below it."""
    n = len(calls)
    try:
        nv = data.nvtx()
    except Unavailable:
        return [None] * n, [None] * n
    if len(nv) == 0 or n == 0:
        return [None] * n, [None] * n
    rt = data.runtime()
    tkey = rt.tkey[calls]
    index = cached_range_index(data)  # every thread's ranges, indexed already on big traces
    if index is None:
        # Only the ranges of the calls' threads: the tree of each thread is its own.
        nv = nv.take(np.flatnonzero(np.isin(nv.tkey, distinct_few(tkey))))
        index = nvtx.build(nv)
    if len(index.order) == 0:  # no ended range on those threads: none holds a call
        return [None] * n, [None] * n
    names = [normalize(x) for x in data.nvtx_names()]
    name = nv.name[index.order]
    skip_name = np.array([x in skip_names for x in data.nvtx_names()] or [False])
    skip = skip_name[name] | (index.end - index.start >= max(1, int(CONTAINER_SHARE * window_ns)))
    inner = nvtx.innermost(index, tkey, rt.start[calls], rt.end[calls])
    top, below, _ = nvtx.climb(index, inner, skip)
    region = [names[int(name[t])] if t >= 0 else None for t in top.tolist()]
    # The operator the program called: the region when it is one (`aten::item`), else the
    # range right below it (`## sparse_data_dist ##` > `aten::to`).
    op = [None if t < 0 else region[i] if "::" in (region[i] or "") else names[int(name[below[i]])]
          for i, t in enumerate(top.tolist())]
    return region, op
