"""Per-layer sync stalls: a tiny host-to-device copy from pageable memory, then a synchronize
that holds the host for milliseconds, once per layer.

A stall is a host-to-device copy of at most STALL_COPY_BYTES from pageable host memory (a
Python scalar or list sent to the GPU: `torch.tensor(x, device="cuda")`, a mask or index
built on the host) whose call is followed on the same thread, within READBACK_GAP_NS of its
return, by a blocking synchronize (cudaStreamSynchronize, cudaDeviceSynchronize ...), the
pair holding the host at least STALL_MIN_NS from the copy call's start to the synchronize's
return. The host waits for the GPU's whole queue once per layer, so it queues the next layer's
work only after the GPU drained.

Each stall is placed in its repeated unit: the innermost range around the synchronize whose
name carries an instance number (`layer_7`, `model.layers.7`), named with the numbers replaced
(`layer_N`), and the instances counted (the layers). The GPU cost is read-backs' (analysis/blocking.py
cost): idle time with nothing queued while the host was blocked, plus the idle time after the
return until the host queued more work.
"""

from __future__ import annotations

import numpy as np

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.blocking import READBACK_GAP_NS, Calls, sync_kinds
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.host_sources import numbered
from nsys_llm_explainer.analysis.join import cached_range_index, match_calls
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

STALL_COPY_BYTES = 4096
STALL_MIN_NS = 1_000_000
H2D = 1
PAGEABLE = 0


def find(data: TraceData) -> Calls | None:
    """The stalls (module docstring) as read-back-like calls: `call` the copy call, `sync` the
    synchronize after it, host blocked from the copy call's start to the synchronize's return.
    None without memcpy records (cached)."""

    def build() -> Calls | None:
        try:
            mc = data.memcpy()
        except Unavailable:
            return None
        rt = data.runtime()
        empty = np.empty(0, np.int64)
        none = Calls(empty, empty, empty, empty, empty.astype(bool), empty.astype(bool), empty, empty, empty)
        tiny = np.flatnonzero((mc.bytes <= STALL_COPY_BYTES) & (mc.copy_kind == H2D) & (mc.src_kind == PAGEABLE))
        if len(tiny) == 0 or len(rt) == 0:
            return none
        call = match_calls(mc.pid[tiny], mc.corr[tiny], rt)
        ok = call >= 0
        tiny, call = tiny[ok], call[ok]
        if len(call) == 0:
            return none
        names = data.runtime_api_names()
        syncing = (sync_kinds(names) == 1) & np.array(["Memcpy" not in n for n in names] or [False])
        order = np.lexsort((rt.start, rt.tkey))
        pos = np.empty(len(rt), dtype=np.int64)
        pos[order] = np.arange(len(rt))
        nxt = order[np.minimum(pos[call] + 1, len(rt) - 1)]
        hit = ((pos[call] + 1 < len(rt)) & (rt.tkey[nxt] == rt.tkey[call]) & syncing[rt.api[nxt]]
               & (rt.start[nxt] - rt.end[call] <= READBACK_GAP_NS) & (rt.end[nxt] - rt.start[call] >= STALL_MIN_NS))
        tiny, call, nxt = tiny[hit], call[hit], nxt[hit]
        n = len(call)
        return Calls(call, tiny, mc.device[tiny], mc.bytes[tiny], np.ones(n, bool), np.ones(n, bool), nxt,
                     rt.start[call], rt.end[nxt])

    return data.cached("layer_syncs", build)


def units(data: TraceData, calls: np.ndarray) -> tuple[list[str | None], list[str | None]]:
    """Per runtime row in `calls`: (the innermost range around it whose name carries an
    instance number, with the numbers replaced: `layer_N`; that range's own name: `layer_7`),
    None where no such range holds it."""
    n = len(calls)
    try:
        nv = data.nvtx()
    except Unavailable:
        return [None] * n, [None] * n
    if len(nv) == 0 or n == 0:
        return [None] * n, [None] * n
    rt = data.runtime()
    tkey = rt.tkey[calls]
    index = cached_range_index(data)
    if index is None:
        nv = nv.take(np.flatnonzero(np.isin(nv.tkey, distinct_few(tkey))))
        index = nvtx.build(nv)
    if len(index.order) == 0:
        return [None] * n, [None] * n
    raw = data.nvtx_names()
    code = nv.name[index.order]
    cache: dict[int, tuple[str, str] | None] = {}

    def instance(c: int) -> tuple[str, str] | None:
        if c not in cache:
            own = normalize(raw[c])
            unit = numbered(own)
            cache[c] = (unit, own) if unit != own else None
        return cache[c]

    found: list[tuple[str, str] | None] = [None] * n
    cur = nvtx.innermost(index, tkey, rt.start[calls], rt.end[calls])
    live = np.flatnonzero(cur >= 0)
    while len(live):
        keep = []
        for i in live.tolist():
            hit = instance(int(code[cur[i]]))
            if hit is not None:
                found[i] = hit
            else:
                keep.append(i)
        live = np.array(keep, dtype=np.int64)
        if len(live):
            cur[live] = index.parent[cur[live]]
            live = live[cur[live] >= 0]
    return [f[0] if f else None for f in found], [f[1] if f else None for f in found]
