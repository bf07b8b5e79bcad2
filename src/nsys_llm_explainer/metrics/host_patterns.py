"""host_patterns: host-side habits that stall the GPU, each with its count and GPU cost.

- Scalar read-backs: a tiny copy (at most READBACK_BYTES, device-to-host or host-to-device)
  whose call blocks the host (synchronous cudaMemcpy*, or pageable memory), or that is followed
  on the same thread by a blocking synchronize starting within READBACK_GAP_NS of the copy
  call's return. That is what `.item()`, `.cpu()`, `.tolist()`, `aten::is_nonzero` or a Python
  `if` on a tensor compile to. Its GPU cost is the device's sync_wait idle time (idle_sweep)
  while the copy call and its sync were in flight, plus the refill launch after them: never
  the host's wait while the GPU was busy running kernels or copies.
- Synchronize per launch: blocking synchronize calls whose previous launch-or-sync call on the
  same thread was a launch (launch, sync, launch, sync ...). Reported when at least
  SYNC_PER_LAUNCH_MIN_CALLS such syncs make up at least SYNC_PER_LAUNCH_SHARE of the thread's
  launches. Its GPU cost is the sync_wait idle time those syncs and their refills cover.
- Synchronous copies: copy calls that block the host (synchronous cudaMemcpy*, or async
  copies to or from pageable memory) other than scalar read-backs. The device drains while
  the call waits: its GPU cost is the transfer idle time the copies cover plus the sync_wait
  idle time while the calls (and the refill launch after them) were in flight (stall).

The three sources can overlap in time (a read-back's sync may also be a sync after a launch),
so sync_wait_pieces splits each device's sync_wait idle time by which of them covers it and
by the API of the blocking call in flight there: a finding reports a source's time once, and
the general blocking-sync finding counts exactly what the reported sources leave.

Ranges: the innermost NVTX range (or PyTorch operator) around the copy call, by normalized
name (analysis/nvtx_names: `aten::copy_, op_id = 7` counts as `aten::copy_`), most frequent
first (ties by name).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nsys_llm_explainer.analysis import intervals, nvtx_tree
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.idle_sweep import SYNC_WAIT, TRANSFER, HostRows, gap_causes
from nsys_llm_explainer.analysis.join import kernel_launch_index, match_calls
from nsys_llm_explainer.analysis.nvtx_names import normalize
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.trace.data import TraceData, Unavailable

READBACK_BYTES = 1024
READBACK_GAP_NS = 50_000
SYNC_PER_LAUNCH_MIN_CALLS = 10
SYNC_PER_LAUNCH_SHARE = 0.5
TOP_RANGES = 5
H2D, D2H = 1, 2


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


def _ranges_at(data: TraceData, tkey: np.ndarray, t: np.ndarray) -> list[dict[str, Any]]:
    try:
        nv = data.nvtx()
    except Unavailable:
        return []
    if len(nv) == 0 or len(t) == 0:
        return []
    from nsys_llm_explainer.analysis.attribution import kernel_attribution

    index = kernel_attribution(data).index
    hit = nvtx_tree.innermost(index, tkey, t, t)
    names = data.nvtx_names()
    found = np.where(hit >= 0, nv.name[index.order[np.maximum(hit, 0)]], -1)
    codes, counts = np.unique(found[found >= 0], return_counts=True)
    by_name: dict[str, int] = {}
    for code, n in zip(codes.tolist(), counts.tolist(), strict=True):
        key = normalize(names[code])
        by_name[key] = by_name.get(key, 0) + n
    top = sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_RANGES]
    return [{"range": name, "count": n} for name, n in top]


def readbacks(data: TraceData, host: HostRows) -> dict[str, Any] | None:
    try:
        mc = data.memcpy()
    except Unavailable:
        return None
    rt = data.runtime()
    tiny = np.flatnonzero((mc.bytes <= READBACK_BYTES) & np.isin(mc.copy_kind, (H2D, D2H)))
    call = match_calls(mc.pid[tiny], mc.corr[tiny], rt)
    ok = call >= 0
    tiny, call = tiny[ok], call[ok]
    if len(call) == 0:
        return {"count": 0, "d2h": 0, "h2d": 0, "idle_ns": 0, "devices": [], "ranges": [], "_spans": {}}
    order = np.lexsort((rt.start, rt.tkey))
    pos = np.empty(len(rt), dtype=np.int64)
    pos[order] = np.arange(len(rt))
    nxt = order[np.minimum(pos[call] + 1, len(rt) - 1)]
    followed = (
        (pos[call] + 1 < len(rt)) & (rt.tkey[nxt] == rt.tkey[call]) & host.blocking[nxt]
        & (rt.start[nxt] - rt.end[call] <= READBACK_GAP_NS)
    )
    hit = host.blocking[call] | followed
    tiny, call, nxt, followed = tiny[hit], call[hit], nxt[hit], followed[hit]
    end = np.where(followed, host.refill_end[nxt], host.refill_end[call])
    cost = _idle_cost(data, mc.device[tiny], rt.start[call], end)
    spans = _per_device(mc.device[tiny], rt.start[call], end)
    return {
        "count": int(len(call)),
        "d2h": int((mc.copy_kind[tiny] == D2H).sum()),
        "h2d": int((mc.copy_kind[tiny] == H2D).sum()),
        "followed_by_sync": int(followed.sum()),
        "idle_ns": int(sum(cost.values())),
        "devices": [{"device_id": d, "idle_ns": ns} for d, ns in sorted(cost.items())],
        "pids": sorted({int(p) for p in rt.pid[call]}),
        "ranges": _ranges_at(data, rt.tkey[call], rt.start[call]),
        "_spans": spans,
    }


def sync_per_launch(data: TraceData, host: HostRows) -> dict[str, Any]:
    rt = data.runtime()
    rows = np.flatnonzero(host.blocking | host.launching)
    rows = rows[np.lexsort((rt.start[rows], rt.tkey[rows]))]
    prev_launch = np.r_[False, host.launching[rows[:-1]] & (rt.tkey[rows[1:]] == rt.tkey[rows[:-1]])]
    after = host.blocking[rows] & prev_launch
    threads = []
    for t in np.unique(rt.tkey[rows]).tolist():
        mine = rt.tkey[rows] == t
        launches = int(host.launching[rows[mine]].sum())
        n = int(after[mine].sum())
        if n >= SYNC_PER_LAUNCH_MIN_CALLS and launches and n >= SYNC_PER_LAUNCH_SHARE * launches:
            threads.append((t, n, launches))
    if not threads:
        return {"found": False, "syncs": 0, "launches": 0, "threads": 0, "idle_ns": 0, "devices": [], "pids": [],
                "_spans": {}}
    keys = np.array([t for t, _, _ in threads])
    sel = rows[after & np.isin(rt.tkey[rows], keys)]
    k = data.kernels()
    pids = np.unique(rt.pid[sel])
    devices = np.unique(k.device[np.isin(k.pid, pids)])
    dev_of = np.repeat(devices, len(sel))
    starts, ends = np.tile(rt.start[sel], len(devices)), np.tile(host.refill_end[sel], len(devices))
    cost = _idle_cost(data, dev_of, starts, ends)
    names = data.runtime_api_names()
    apis, counts = np.unique(rt.api[sel], return_counts=True)
    return {
        "found": True,
        "syncs": int(sum(n for _, n, _ in threads)),
        "launches": int(sum(n for _, _, n in threads)),
        "threads": len(threads),
        "apis": [{"api": names[int(a)], "calls": int(c)} for a, c in zip(apis, counts, strict=True)],
        "idle_ns": int(sum(cost.values())),
        "devices": [{"device_id": d, "idle_ns": ns} for d, ns in sorted(cost.items())],
        "pids": [int(p) for p in pids],
        "_spans": _per_device(dev_of, starts, ends),
    }


def _per_device(devices: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    return {int(d): intervals.merge(start[devices == d], end[devices == d]) for d in np.unique(devices).tolist()}


def sync_copies(data: TraceData, host: HostRows) -> dict[str, Any] | None:
    """Host-blocking copy calls other than scalar read-backs, with their GPU cost per device
    (`_spans`: per device, the calls with their refill, for sync_wait_pieces)."""
    try:
        mc = data.memcpy()
    except Unavailable:
        return None
    rt = data.runtime()
    call = match_calls(mc.pid, mc.corr, rt)
    ok = call >= 0
    ok[ok] &= host.blocking[call[ok]]
    readback = (mc.bytes <= READBACK_BYTES) & np.isin(mc.copy_kind, (H2D, D2H))
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
        devices.append({"device_id": dev, "transfer_ns": t_ns, "stall_ns": s_ns, "idle_ns": t_ns + s_ns})
    names = data.runtime_api_names()
    apis, counts = np.unique(rt.api[call], return_counts=True)
    launchers = np.unique(rt.tkey[kernel_launch_index(data)[kernel_launch_index(data) >= 0]])
    return {
        "count": int(len(rows)),
        "bytes": int(mc.bytes[rows].sum()),
        "copy_ns": int((mc.end[rows] - mc.start[rows]).sum()),
        "on_launch_threads": int(np.isin(rt.tkey[call], launchers).sum()),
        "apis": [{"api": names[int(a)], "calls": int(c)} for a, c in zip(apis, counts, strict=True)],
        "idle_ns": int(sum(d["idle_ns"] for d in devices)),
        "devices": devices,
        "pids": sorted({int(p) for p in rt.pid[call]}),
        "_spans": spans,
    }


def sync_wait_pieces(
    data: TraceData, host: HostRows, sources: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]]
) -> list[dict[str, Any]]:
    """Each device's sync_wait idle time cut by which sources cover it and by the API of the
    owning processes' blocking call in flight (with its refill) there, summed per (device,
    sources, api): [{"device_id", "sources": [...], "api", "idle_ns"}]. A piece covered by
    calls of several APIs goes to the API with the most sync_wait time on that device."""
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
        own = {k: v[dev] for k, v in sources.items() if dev in v}
        cuts = [ss, se] + [x for s, e in (*apis.values(), *own.values()) for x in (s, e)]
        edges = np.unique(np.concatenate(cuts))
        p0, p1 = edges[:-1], edges[1:]
        keep = intervals.overlap_with_union(p0, p1, ss, se) == p1 - p0
        p0, p1 = p0[keep], p1[keep]
        member = {k: intervals.overlap_with_union(p0, p1, s, e) > 0 for k, (s, e) in own.items()}
        order = sorted(apis, key=lambda a: -int(intervals.overlap_with_union(*apis[a], ss, se).sum()))
        api_of = np.full(len(p0), -1, dtype=np.int64)
        for a in reversed(order):
            api_of[intervals.overlap_with_union(p0, p1, *apis[a]) > 0] = a
        key = np.zeros(len(p0), dtype=np.int64)
        names_of = sorted(member)
        for bit, k in enumerate(names_of):
            key |= member[k].astype(np.int64) << bit
        length = p1 - p0
        for combo in np.unique(key).tolist():
            for a in np.unique(api_of[key == combo]).tolist():
                sel = (key == combo) & (api_of == a)
                out.append({
                    "device_id": dev,
                    "sources": [k for bit, k in enumerate(names_of) if combo >> bit & 1],
                    "api": names[a] if a >= 0 else None,
                    "idle_ns": int(length[sel].sum()),
                })
    return out


def run(ctx: Context) -> Outcome:
    data = ctx.data
    if len(data.kernels()) == 0:
        return METRIC.skipped("no kernels were captured, so no host habit can stall them")
    if len(data.runtime()) == 0:
        return METRIC.skipped("the CUDA API table is empty, so host-side calls are unknown")
    host = HostRows.of(data)
    rb = readbacks(data, host)
    spl = sync_per_launch(data, host)
    copies = sync_copies(data, host)
    notes = () if rb is not None else ("scalar read-backs and synchronous copies: not measured, because the "
                                       "trace has no memcpy records",)
    spans = {name: src.pop("_spans") for name, src in (("scalar_readbacks", rb), ("sync_per_launch", spl),
                                                      ("sync_copies", copies)) if src is not None}
    return MetricResult(METRIC.id, {
        "readback_bytes": READBACK_BYTES,
        "scalar_readbacks": rb,
        "sync_per_launch": spl,
        "sync_copies": copies,
        "sync_wait_pieces": sync_wait_pieces(data, host, spans),
    }, notes=notes)


METRIC = Metric(
    id="host_patterns",
    title="Host habits that stall the GPU",
    run=run,
    description="Scalar read-backs (tiny copies with a blocking sync), one synchronize per launch "
    "and synchronous copies, each with its count and the GPU idle time it causes.",
)
