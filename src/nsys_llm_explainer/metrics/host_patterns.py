"""host_patterns: host-side habits that stall the GPU, each with its count and GPU cost.

- Read-backs (analysis/blocking.py): a device-to-host copy of at most READBACK_BYTES whose
  call blocks the host (synchronous cudaMemcpy*, or pageable memory), or that is followed on
  the same thread by a blocking synchronize starting within READBACK_GAP_NS of the copy
  call's return. That is what `.item()`, `.cpu()`, `.tolist()`, `aten::is_nonzero` or a Python
  `if` on a tensor compile to. Per read-back: the host time blocked, the device's busy time
  meanwhile, its idle time with nothing queued (sync_wait) and with queued work waiting on
  something else (device_wait), and the idle time after the call returned when the call had
  drained the device's queue. Its GPU cost (idle_ns) is the device's sync_wait idle time
  while the copy call and its sync were in flight, plus the refill launch after them: never
  the host's wait while the GPU was busy running kernels or copies; idle_after_ns, by idle
  cause, is the idle time from the return to the device's next work. Read-backs are grouped
  by where they come from (the outermost range below the step, the innermost range, the
  size), and counted per step (steps metric). Tiny host-to-device copies that block are
  synchronous copies, not read-backs.
- Per-layer sync stalls (analysis/host_sources.py): a tiny host-to-device copy from pageable
  memory, then a synchronize holding the host at least a millisecond, once per layer. Per
  group (the repeated range around them, `layer_N`, the copy size and the synchronize's API):
  the count, the layers, the host time blocked and the GPU cost read-backs have (idle with
  nothing queued while blocked, and after the return until the host queued more).
- Synchronize per launch: blocking synchronize calls whose previous launch-or-sync call on the
  same thread was a launch (launch, sync, launch, sync ...). Reported when at least
  SYNC_PER_LAUNCH_MIN_CALLS such syncs make up at least SYNC_PER_LAUNCH_SHARE of the thread's
  launches. Its GPU cost is the sync_wait idle time those syncs and their refills cover.
- Synchronous copies: copy calls that block the host (synchronous cudaMemcpy*, or async
  copies to or from pageable memory) other than scalar read-backs and the copies of per-layer
  sync stalls. The device drains while
  the call waits: its GPU cost is the transfer idle time the copies cover plus the sync_wait
  idle time while the calls (and the refill launch after them) were in flight (stall).

The three sources can overlap in time (a read-back's sync may also be a sync after a launch),
so sync_wait_pieces splits each device's sync_wait idle time by which of them covers it and
by the API of the blocking call in flight there: a finding reports a source's time once, and
the general blocking-sync finding counts exactly what the reported sources leave.

Ranges: the innermost NVTX range (or PyTorch operator) around the copy call, by normalized
name (analysis/nvtx: `aten::copy_, op_id = 7` counts as `aten::copy_`), most frequent
first (ties by name).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer.analysis import blocking as rbk
from nsys_llm_explainer.analysis import host_sources as lsync
from nsys_llm_explainer.analysis import intervals, nvtx
from nsys_llm_explainer.analysis.blocking import HostRows
from nsys_llm_explainer.analysis.busy import device_busy
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import rows_by_value
from nsys_llm_explainer.analysis.host_sources import step_range_names
from nsys_llm_explainer.analysis.idle_sweep import (
    CAUSES,
    HOST_OTHER,
    LAUNCH_BOUND,
    SYNC_WAIT,
    TRANSFER,
    gap_causes,
)
from nsys_llm_explainer.analysis.join import kernel_launch_index, match_calls
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.results.host import (
    CopyDevice,
    DeviceIdle,
    HostPatterns,
    LayerSyncGroup,
    LayerSyncs,
    PerStep,
    RangeCount,
    ReadbackGroup,
    ScalarReadbacks,
    StallDevice,
    SyncCopies,
    SyncPerLaunch,
    SyncWaitPiece,
)
from nsys_llm_explainer.results.launches import ApiCalls
from nsys_llm_explainer.results.run import Steps
from nsys_llm_explainer.trace.clean import api_base_name
from nsys_llm_explainer.trace.data import TraceData, Unavailable

READBACK_BYTES = rbk.READBACK_BYTES
READBACK_GAP_NS = rbk.READBACK_GAP_NS
SYNC_PER_LAUNCH_MIN_CALLS = 10
SYNC_PER_LAUNCH_SHARE = 0.5
TOP_RANGES = 5
H2D, D2H = 1, 2

Spans = dict[int, tuple[np.ndarray, np.ndarray]]  # per device: merged [start, end) of a source's calls


def _idle_cost(data: TraceData, devices: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict[int, int]:
    """Per device: the device's sync_wait idle time (idle_sweep) inside the union of
    [start, end): never busy time, nor idle time a copy or communication covers."""
    out: dict[int, int] = {}
    causes = gap_causes(data)
    for dev in np.unique(devices).tolist():
        gc = causes.get(int(dev))
        if gc is None:
            continue
        sel = devices == dev
        us, ue = intervals.merge(start[sel], end[sel])
        gs, ge = gc.segments[SYNC_WAIT]
        inter = intervals.intersect(us, ue, gs, ge)
        out[int(dev)] = int((inter[1] - inter[0]).sum())
    return out


def _ranges_at(data: TraceData, tkey: np.ndarray, t: np.ndarray) -> tuple[RangeCount, ...]:
    try:
        nv = data.nvtx()
    except Unavailable:
        return ()
    if len(nv) == 0 or len(t) == 0:
        return ()
    from nsys_llm_explainer.analysis.join import kernel_attribution

    index = kernel_attribution(data).index
    hit = nvtx.innermost(index, tkey, t, t)
    names = data.nvtx_names()
    found = np.where(hit >= 0, nv.name[index.order[np.maximum(hit, 0)]], -1)
    codes, counts = np.unique(found[found >= 0], return_counts=True)
    by_name: dict[str, int] = {}
    for code, n in zip(codes.tolist(), counts.tolist(), strict=True):
        key = normalize(names[code])
        by_name[key] = by_name.get(key, 0) + n
    top = sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_RANGES]
    return tuple(RangeCount(name, n) for name, n in top)


def readbacks(ctx: Context, host: HostRows) -> tuple[ScalarReadbacks, Spans] | None:
    """Read-backs (analysis/blocking.py) with their cost, where they come from and how many
    each step holds; with the calls' spans per device (for sync_wait_pieces)."""
    data = ctx.data
    rb = rbk.find_blocking(data) if host is HostRows.of(data) else rbk.find(data, host.blocking)
    if rb is None:
        return None
    rt = data.runtime()
    if len(rb.call) == 0:
        return ScalarReadbacks(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (), (), (), (), None), {}
    causes = gap_causes(data)
    cost = rbk.cost(data, rb, causes, device_busy(data), SYNC_WAIT, (LAUNCH_BOUND, HOST_OTHER))
    refill = np.where(rb.followed, host.refill_end[np.maximum(rb.sync, 0)], host.refill_end[rb.call])
    refill = np.maximum(refill, rb.end)
    during = _idle_cost(data, rb.device, rb.start, refill)
    window = max((b.window[1] - b.window[0] for b in device_busy(data).values()), default=0)
    steps = ctx.typed(Steps)
    skip = step_range_names(data, ctx.options.step_range, steps.ranges if steps else ())
    region, op = rbk.origins(data, rb, skip, window)
    devices = _stall_devices(causes, during, rb.device, rb.end, cost.after_end)
    return ScalarReadbacks(
        count=int(len(rb.call)),
        d2h=int(len(rb.call)),
        h2d=0,
        followed_by_sync=int(rb.followed.sum()),
        pageable=int(rb.pageable.sum()),
        idle_ns=int(sum(during.values())),
        idle_after_ns=sum(d.after_ns for d in devices),
        host_blocked_ns=int((rb.end - rb.start).sum()),
        busy_ns=int(cost.busy_ns.sum()),
        queued_during_ns=int(cost.queued_during_ns.sum()),
        devices=devices,
        pids=tuple(sorted({int(p) for p in rt.pid[rb.call]})),
        ranges=_ranges_at(data, rt.tkey[rb.call], rt.start[rb.call]),
        groups=_groups(rb, cost, region, op),
        per_step=_per_step(ctx, rt.pid[rb.call], rb.start),
    ), _per_device(rb.device, rb.start, refill)


def _stall_devices(causes: dict[int, Any], during: dict[int, int], device: np.ndarray, end: np.ndarray,
                   after_end: np.ndarray) -> tuple[StallDevice, ...]:
    """Per device (in id order): the sync_wait idle time `during` the calls, and the host-late
    idle time from each call's `end` to its `after_end`, by cause."""
    out = []
    for dev in sorted(during):
        sel = device == dev
        after = _after_by_cause(causes.get(dev), end[sel], after_end[sel])
        out.append(StallDevice(dev, during[dev], int(sum(after.values())), after))
    return tuple(out)


def layer_syncs(ctx: Context, host: HostRows) -> tuple[LayerSyncs, Spans] | None:
    """Per-layer sync stalls (analysis/host_sources.py) with their cost, their layers and how
    many each step holds, and the calls' spans per device; None without memcpy records."""
    data = ctx.data
    st = lsync.find(data)
    if st is None:
        return None
    rt = data.runtime()
    names = data.runtime_api_names()
    if len(st.call) == 0:
        return LayerSyncs(0, 0, 0, 0, 0, (), (), None), {}
    causes = gap_causes(data)
    cost = rbk.cost(data, st, causes, device_busy(data), SYNC_WAIT, (LAUNCH_BOUND, HOST_OTHER))
    refill = np.maximum(host.refill_end[st.sync], st.end)
    during = _idle_cost(data, st.device, st.start, refill)
    unit, own = lsync.units(data, st.sync)
    devices = _stall_devices(causes, during, st.device, st.end, cost.after_end)
    members: dict[tuple[str | None, int, str], list[int]] = {}
    for i in range(len(st.call)):
        members.setdefault((unit[i], int(st.bytes[i]), api_base_name(names[int(rt.api[st.sync[i]])])), []).append(i)
    sync_ns = rt.end[st.sync] - rt.start[st.sync]
    groups = []
    for (u, nbytes, api), rows in members.items():
        ix = np.asarray(rows)
        groups.append(LayerSyncGroup(
            u, nbytes, api, len(rows), len({own[i] for i in rows} - {None}),
            int((st.end[ix] - st.start[ix]).sum()), int(sync_ns[ix].sum()), int(cost.busy_ns[ix].sum()),
            int(cost.idle_during_ns[ix].sum()), int(cost.idle_after_ns[ix].sum())))
    ordered = sorted(groups, key=lambda g: (-g.host_blocked_ns, -g.count, str(g.unit)))
    return LayerSyncs(
        count=int(len(st.call)),
        host_blocked_ns=int((st.end - st.start).sum()),
        idle_ns=int(sum(during.values())),
        idle_after_ns=sum(d.after_ns for d in devices),
        busy_ns=int(cost.busy_ns.sum()),
        devices=devices,
        groups=tuple(ordered[:TOP_RANGES]),
        per_step=_per_step(ctx, rt.pid[st.call], st.start),
    ), _per_device(st.device, st.start, refill)


def _after_by_cause(gc: Any, s: np.ndarray, e: np.ndarray) -> dict[str, int]:
    """The host-late idle time (launch_bound, host_other) in [s, e) of the device, by cause."""
    if gc is None or not len(s):
        return {}
    us, ue = intervals.merge(s, e)
    out: dict[str, int] = {}
    for i in (LAUNCH_BOUND, HOST_OTHER):
        name = CAUSES[i]
        seg = intervals.intersect(us, ue, *gc.segments[i])
        ns = int((seg[1] - seg[0]).sum())
        if ns:
            out[name] = ns
    return out


def _groups(rb: Any, cost: Any, region: list[str | None], op: list[str | None]) -> tuple[ReadbackGroup, ...]:
    """Read-backs grouped by (outermost range below the step, operator, bytes), the longest
    host blocking first."""
    members: dict[tuple[str | None, str | None, int], list[int]] = {}
    for i in range(len(rb.call)):
        members.setdefault((region[i], op[i], int(rb.bytes[i])), []).append(i)
    groups = []
    for (reg, name, nbytes), rows in members.items():
        ix = np.asarray(rows)
        groups.append(ReadbackGroup(
            reg, name, nbytes, len(rows), int(rb.pageable[ix].sum()), int((rb.end[ix] - rb.start[ix]).sum()),
            int(cost.busy_ns[ix].sum()), int(cost.idle_during_ns[ix].sum()), int(cost.queued_during_ns[ix].sum()),
            int(cost.idle_after_ns[ix].sum())))
    ordered = sorted(groups, key=lambda g: (-g.host_blocked_ns, -g.count, str(g.region)))
    return tuple(ordered[:TOP_RANGES])


def _per_step(ctx: Context, pid: np.ndarray, start: np.ndarray) -> PerStep | None:
    """How many read-backs each step holds (their call starts inside the step's host range,
    same process): steps, steps with one or more, median, max; None without steps."""
    st = ctx.result("steps")
    table = next((t for t in st.tables if t.name == "steps"), None) if st is not None else None
    if table is None or table.frame is None or table.frame.empty:
        return None
    f = table.frame
    counts = np.zeros(len(f), np.int64)
    for j, (p, s0, e0) in enumerate(zip(f["pid"].to_numpy(), f["start_ns"].to_numpy(), f["end_ns"].to_numpy(),
                                        strict=True)):
        counts[j] = int(((pid == p) & (start >= s0) & (start < e0)).sum())
    return PerStep(int(len(f)), int((counts > 0).sum()), float(np.median(counts)), int(counts.max()))


def syncs_after_launches(
    tkey: np.ndarray, start: np.ndarray, blocking: np.ndarray, launching: np.ndarray,
) -> tuple[list[tuple[int, int, int]], np.ndarray]:
    """The threads that synchronize after (nearly) every launch, as (thread, blocking calls
    right after a launch, launches), and those calls' rows, thread by thread in time order.

    A thread's blocking and launching calls in time order (ties in row order); each thread
    alone, so no sort of every call of the trace."""
    chosen = blocking | launching
    threads, picked = [], []
    for t, rows in rows_by_value(tkey):
        rows = rows[chosen[rows]]
        if not len(rows):
            continue
        rows = rows[np.argsort(start[rows], kind="stable")]
        launch = launching[rows]
        after = np.zeros(len(rows), dtype=bool)
        after[1:] = blocking[rows[1:]] & launch[:-1]
        launches, n = int(launch.sum()), int(after.sum())
        if n >= SYNC_PER_LAUNCH_MIN_CALLS and launches and n >= SYNC_PER_LAUNCH_SHARE * launches:
            threads.append((t, n, launches))
            picked.append(rows[after])
    return threads, (np.concatenate(picked) if picked else np.empty(0, np.int64))


def sync_per_launch(data: TraceData, host: HostRows) -> tuple[SyncPerLaunch, Spans]:
    rt = data.runtime()
    threads, sel = syncs_after_launches(rt.tkey, rt.start, host.blocking, host.launching)
    if not threads:
        return SyncPerLaunch(False, 0, 0, 0, 0, (), ()), {}
    k = data.kernels()
    pids = np.unique(rt.pid[sel])
    devices = np.unique(k.device[np.isin(k.pid, pids)])
    dev_of = np.repeat(devices, len(sel))
    starts, ends = np.tile(rt.start[sel], len(devices)), np.tile(host.refill_end[sel], len(devices))
    cost = _idle_cost(data, dev_of, starts, ends)
    names = data.runtime_api_names()
    apis, counts = np.unique(rt.api[sel], return_counts=True)
    return SyncPerLaunch(
        found=True,
        syncs=int(sum(n for _, n, _ in threads)),
        launches=int(sum(n for _, _, n in threads)),
        threads=len(threads),
        apis=tuple(ApiCalls(names[int(a)], int(c)) for a, c in zip(apis, counts, strict=True)),
        idle_ns=int(sum(cost.values())),
        devices=tuple(DeviceIdle(d, ns) for d, ns in sorted(cost.items())),
        pids=tuple(int(p) for p in pids),
    ), _per_device(dev_of, starts, ends)


def _per_device(devices: np.ndarray, start: np.ndarray, end: np.ndarray) -> Spans:
    return {int(d): intervals.merge(start[devices == d], end[devices == d]) for d in np.unique(devices).tolist()}


def sync_copies(data: TraceData, host: HostRows) -> tuple[SyncCopies, Spans] | None:
    """Host-blocking copy calls other than scalar read-backs and the copies of per-layer sync
    stalls, with their GPU cost per device, and per device the calls with their refill (for
    sync_wait_pieces)."""
    try:
        mc = data.memcpy()
    except Unavailable:
        return None
    rt = data.runtime()
    call = match_calls(mc.pid, mc.corr, rt)
    ok = call >= 0
    ok[ok] &= host.blocking[call[ok]]
    readback = (mc.bytes <= READBACK_BYTES) & (mc.copy_kind == D2H)
    stalls = lsync.find(data)
    if stalls is not None and len(stalls.copy):
        readback[stalls.copy] = True
    rows = np.flatnonzero(ok & ~readback)
    call = call[rows]
    causes = gap_causes(data)
    spans = _per_device(mc.device[rows], rt.start[call], host.refill_end[call])
    copies = _per_device(mc.device[rows], mc.start[rows], mc.end[rows])
    devices = []
    for dev, (cs, ce) in sorted(copies.items()):
        gc = causes.get(dev)
        if gc is None:
            continue
        transfer = intervals.intersect(cs, ce, *gc.segments[TRANSFER])
        stall = intervals.intersect(*spans[dev], *gc.segments[SYNC_WAIT])
        t_ns, s_ns = int((transfer[1] - transfer[0]).sum()), int((stall[1] - stall[0]).sum())
        devices.append(CopyDevice(dev, t_ns, s_ns, t_ns + s_ns))
    names = data.runtime_api_names()
    apis, counts = np.unique(rt.api[call], return_counts=True)
    # The copy calls' threads that launched a kernel: runtime-sized masks only (the launch
    # calls of millions of kernels are not gathered).
    threads = np.unique(rt.tkey[call])
    launched = np.zeros(len(rt) + 1, dtype=bool)
    launched[kernel_launch_index(data)] = True  # -1 (no launch call) lands on the extra slot
    launchers = np.unique(rt.tkey[launched[:-1] & np.isin(rt.tkey, threads)])
    del launched
    return SyncCopies(
        count=int(len(rows)),
        bytes=int(mc.bytes[rows].sum()),
        copy_ns=int((mc.end[rows] - mc.start[rows]).sum()),
        on_launch_threads=int(np.isin(rt.tkey[call], launchers).sum()),
        apis=tuple(ApiCalls(names[int(a)], int(c)) for a, c in zip(apis, counts, strict=True)),
        idle_ns=int(sum(d.idle_ns for d in devices)),
        devices=tuple(devices),
        pids=tuple(sorted({int(p) for p in rt.pid[call]})),
    ), spans


def sync_wait_pieces(data: TraceData, host: HostRows, sources: dict[str, Spans]) -> tuple[SyncWaitPiece, ...]:
    """Each device's sync_wait idle time cut by which sources cover it and by the API of the
    owning processes' blocking call in flight (with its refill) there, summed per (device,
    sources, api). A piece covered by calls of several APIs goes to the API with the most
    sync_wait time on that device."""
    rt = data.runtime()
    names = data.runtime_api_names()
    out = []
    for dev, gc in sorted(gap_causes(data).items()):
        ss, se = gc.segments[SYNC_WAIT]
        if len(ss) == 0:
            continue
        rows = host.rows_of(gc.owners)
        rows = rows[host.blocking[rows]]
        apis = {int(a): intervals.merge(rt.start[rows[rt.api[rows] == a]], host.refill_end[rows[rt.api[rows] == a]])
                for a in np.unique(rt.api[rows]).tolist()}
        del rows
        own = {k: v[dev] for k, v in sources.items() if dev in v}
        # piece-sized arrays go as soon as they are read: this runs at the end of the metric
        # that holds the idle split, on millions of pieces
        edges = np.unique(np.concatenate([ss, se] + [x for s, e in (*apis.values(), *own.values()) for x in (s, e)]))
        p0, p1 = edges[:-1], edges[1:]
        keep = intervals.overlap_with_union(p0, p1, ss, se) == p1 - p0
        p0, p1 = p0[keep], p1[keep]
        del edges, keep
        member = {k: intervals.overlap_with_union(p0, p1, s, e) > 0 for k, (s, e) in own.items()}
        order = sorted(apis, key=lambda a: -int(intervals.overlap_with_union(*apis[a], ss, se).sum()))
        api_of = np.full(len(p0), -1, dtype=np.int64)
        for a in reversed(order):
            api_of[intervals.overlap_with_union(p0, p1, *apis[a]) > 0] = a
        key = np.zeros(len(p0), dtype=np.int64)
        names_of = sorted(member)
        for bit, k in enumerate(names_of):
            key |= member.pop(k).astype(np.int64) << bit
        length = p1 - p0
        del p0, p1
        for combo in np.unique(key).tolist():
            for a in np.unique(api_of[key == combo]).tolist():
                sel = (key == combo) & (api_of == a)
                out.append(SyncWaitPiece(
                    device_id=dev,
                    sources=tuple(k for bit, k in enumerate(names_of) if combo >> bit & 1),
                    api=names[a] if a >= 0 else None,
                    idle_ns=int(length[sel].sum()),
                ))
    return tuple(out)


def run(ctx: Context) -> Outcome:
    data = ctx.data
    if len(data.kernels()) == 0:
        return METRIC.skipped("no kernels were captured, so no host habit can stall them")
    if len(data.runtime()) == 0:
        return METRIC.skipped("the CUDA API table is empty, so host-side calls are unknown")
    host = HostRows.of(data)
    rb = readbacks(ctx, host)
    stalls = layer_syncs(ctx, host)
    spl = sync_per_launch(data, host)
    copies = sync_copies(data, host)
    notes = () if rb is not None else ("scalar read-backs and synchronous copies: not measured, because the "
                                       "trace has no memcpy records",)
    spans = {name: src[1] for name, src in (("scalar_readbacks", rb), ("layer_syncs", stalls),
                                            ("sync_per_launch", spl), ("sync_copies", copies))
             if src is not None}
    result = HostPatterns(
        readback_bytes=READBACK_BYTES,
        scalar_readbacks=None if rb is None else rb[0],
        layer_syncs=None if stalls is None else stalls[0],
        sync_per_launch=spl[0],
        sync_copies=None if copies is None else copies[0],
        sync_wait_pieces=sync_wait_pieces(data, host, spans),
    )
    return MetricResult(METRIC.id, result.to_json(), notes=notes, typed=result)


METRIC = Metric(
    id="host_patterns",
    order=180,
    run_after="steps",  # with timeline, the last reader of the idle split besides idle_causes
    title="Host habits that stall the GPU",
    run=run,
    description="Read-backs (tiny device-to-host copies that wait for the GPU's queue), per-layer sync stalls, one "
    "synchronize per launch and synchronous copies, each with its count and the GPU idle time it causes.",
    after=("steps",),
    reads=(
        "runtime", "host_rows", "gap_causes", "kernel_launch_index", "kernel_attribution",
        "comm_mask", "readbacks", "nvtx_normalized",
    ),
)
