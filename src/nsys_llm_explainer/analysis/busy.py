"""Each device's own work and when it is busy, shared by gpu_idle, idle_causes, the idle
sweep, communication, timeline and capture.

The device's work (gpu_work): its kernels, its executions of CUDA graphs traced whole
(nsys --cuda-graph-trace=graph writes one row per graph execution and no kernel rows for
the graph's nodes), and its device-local copies and memsets (device-to-device, array copies
within the device, memset: memory work of the device itself, not a transfer it waits on).
Busy time is the union of that work (device_busy); transfers (host<->device and peer
copies, transfer_union) are kept apart, as what idle time may be spent waiting on.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.join import kernel_launch_index, match_calls
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import TraceData, Unavailable

GRAPH_LAUNCH_APIS = (
    "cudaGraphLaunch",
    "cuGraphLaunch",
    "cudaGraphLaunch_ptsz",
    "cuGraphLaunch_ptsz",
    "hipGraphLaunch",  # ROCm, in PyTorch profiler traces
)

# CUPTI_ACTIVITY_MEMCPY_KIND_* that stay inside one device's memory: array-to-array,
# array-to-device, device-to-array, device-to-device (a device-to-device copy between two
# devices is a peer transfer).
DEVICE_LOCAL_COPY_KINDS = (5, 6, 7, 8)
# gpu_work sources
KERNEL, GRAPH, DEVICE_COPY, MEMSET = range(4)
WORK_COLUMNS = ("start", "end", "device", "stream", "pid", "corr", "source", "row")


@frozen
class DeviceBusy:
    device_id: int
    busy_start: np.ndarray  # merged, disjoint kernel intervals
    busy_end: np.ndarray
    gap_start: np.ndarray
    gap_end: np.ndarray

    @property
    def window(self) -> tuple[int, int]:
        return int(self.busy_start[0]), int(self.busy_end[-1])


def device_local_copies(c: Columns) -> np.ndarray:
    """Per memcpy row: the copy stays inside its device's memory (not a transfer)."""
    peer = (c.src_device >= 0) & (c.dst_device >= 0) & (c.src_device != c.dst_device)
    return np.isin(c.copy_kind, DEVICE_LOCAL_COPY_KINDS) & ~peer


def _optional(loader: Callable[[], Columns]) -> Columns | None:
    try:
        return loader()
    except Unavailable:
        return None


def gpu_work(data: TraceData) -> Columns:
    """Every piece of the devices' own work (see the module docstring), one row each:
    start, end, device, stream, pid, corr (joins its launch or copy call in runtime()),
    source (KERNEL, GRAPH, DEVICE_COPY, MEMSET) and row (its index in that source's table).
    Only devices that ran kernels or graphs keep their copies and memsets (cached).

    The columns are the kernels' own arrays when the kernels are all the work, else
    concatenated when read: the tables they come from are held anyway, and millions of
    rows copied into a second table would be held with them."""

    def build() -> Columns:
        k = data.kernels()
        parts: list[WorkPart] = [(KERNEL, k, None)]
        g = _optional(data.graph_execs)
        if g is not None and len(g):
            parts.append((GRAPH, g, None))
        compute_devices = np.unique(np.concatenate([p[1].device for p in parts]))
        mc = _optional(data.memcpy)
        if mc is not None:
            rows = np.flatnonzero(device_local_copies(mc) & np.isin(mc.device, compute_devices))
            if len(rows):
                parts.append((DEVICE_COPY, mc, rows))
        ms = _optional(data.memset)
        if ms is not None:
            rows = np.flatnonzero(np.isin(ms.device, compute_devices))
            if len(rows):
                parts.append((MEMSET, ms, rows))
        return _work_columns(parts)

    return data.cached("gpu_work", build)


# (source, its table, the rows of it that are device work; None: every row)
WorkPart = tuple[int, Columns, "np.ndarray | None"]


def _work_columns(parts: list[WorkPart]) -> Columns:
    sizes = [len(c) if rows is None else len(rows) for _, c, rows in parts]
    n = sum(sizes)
    stored: dict[str, np.ndarray] = {}
    computed: dict[str, Callable[[], np.ndarray]] = {}

    def concatenated(name: str) -> Callable[[], np.ndarray]:
        def build() -> np.ndarray:
            v = np.concatenate([c[name] if rows is None else c[name][rows] for _, c, rows in parts])
            return v.astype(np.int64, copy=False)
        return build

    for name in ("start", "end", "device", "stream", "pid", "corr"):
        if len(parts) == 1:
            stored[name] = parts[0][1][name]
        else:
            computed[name] = concatenated(name)
    computed["source"] = lambda: np.concatenate(
        [np.full(size, source, dtype=np.int8) for (source, _, _), size in zip(parts, sizes, strict=True)]
    )
    computed["row"] = lambda: np.concatenate(
        [np.arange(len(c), dtype=np.int64) if rows is None else rows for _, c, rows in parts]
    )
    return Columns("gpu_work", stored, computed=computed, size=n)


def work_calls(data: TraceData) -> np.ndarray:
    """Per gpu_work row: the runtime() row of its launch or copy call, or -1 (cached)."""

    def build() -> np.ndarray:
        w = gpu_work(data)
        call = np.full(len(w), -1, dtype=np.int64)
        rt = _optional(data.runtime)
        if rt is None or len(rt) == 0:
            return call
        is_k = w.source == KERNEL
        call[is_k] = kernel_launch_index(data)[w.row[is_k]]
        if not is_k.all():
            call[~is_k] = match_calls(w.pid[~is_k], w.corr[~is_k], rt)
        return call

    return data.cached("work_calls", build)


def graph_launches(data: TraceData) -> tuple[int, int]:
    """(CUDA graph launch calls, those no device work joins on (pid, correlationId)): graphs
    whose GPU time the trace cannot place (traced whole without graph-trace rows, or cut off
    by the end of the capture)."""
    rt = _optional(data.runtime)
    if rt is None or len(rt) == 0:
        return 0, 0
    codes = [i for i, n in enumerate(data.runtime_api_names()) if n in GRAPH_LAUNCH_APIS]
    is_launch = np.isin(rt.api, codes)
    if not is_launch.any():
        return 0, 0
    placed = np.zeros(len(rt), dtype=bool)
    calls = work_calls(data)
    placed[calls[calls >= 0]] = True
    return int(is_launch.sum()), int((is_launch & ~placed).sum())


def device_busy(data: TraceData) -> dict[int, DeviceBusy]:
    """Merged work intervals (gpu_work) and gaps per device (cached: idle causes and plots
    reuse it)."""

    def build() -> dict[int, DeviceBusy]:
        w = gpu_work(data)
        device, start, end = w.device, w.start, w.end
        out: dict[int, DeviceBusy] = {}
        for dev in distinct_few(device).tolist():
            mine = device == dev
            bs, be = intervals.merge(start[mine], end[mine])
            out[int(dev)] = DeviceBusy(int(dev), bs, be, be[:-1], bs[1:])
        return out

    return data.cached("device_busy", build)


def _copy_rows(data: TraceData, column: str, value: int, transfers_only: bool) -> tuple[np.ndarray, np.ndarray]:
    starts, ends = [], []
    mc = _optional(data.memcpy)
    if mc is not None:
        mine = mc[column] == value
        if transfers_only:
            mine &= ~device_local_copies(mc)
        starts.append(mc.start[mine])
        ends.append(mc.end[mine])
    ms = _optional(data.memset) if not transfers_only else None
    if ms is not None:
        mine = ms[column] == value
        starts.append(ms.start[mine])
        ends.append(ms.end[mine])
    if not starts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return intervals.merge(np.concatenate(starts), np.concatenate(ends))


def copy_union(data: TraceData, column: str, value: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of all memcpy/memset intervals whose `column` ("device" or "pid") is `value`
    (empty when those tables are absent)."""
    return _copy_rows(data, column, value, transfers_only=False)


def transfer_union(data: TraceData, device: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of the device's transfers: memcpy rows that cross its boundary (host<->device,
    peer), not device-local copies or memsets (cached per device)."""
    return data.cached(f"transfer_union:{device}", lambda: _copy_rows(data, "device", device, transfers_only=True))


# CUPTI_ACTIVITY_MEMCPY_KIND_* and CUPTI_ACTIVITY_MEMORY_KIND_* (same numbers in every
# export seen, 2022.4 to 2026.2) for exports without ENUM tables.
COPY_KINDS = {
    0: "Unknown",
    1: "Host-to-Device",
    2: "Device-to-Host",
    3: "Host-to-Array",
    4: "Array-to-Host",
    5: "Array-to-Array",
    6: "Array-to-Device",
    7: "Device-to-Array",
    8: "Device-to-Device",
    9: "Host-to-Host",
    10: "Peer-to-Peer",
}


def copy_kind_labels(data: TraceData) -> tuple[dict[int, str], bool]:
    found = data.enum_labels("copy")
    return (found, True) if found else (dict(COPY_KINDS), False)
