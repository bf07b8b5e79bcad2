"""gpu_idle: per device, busy = union of the device's own work; idle = window - busy.

The device's work (gpu_work): its kernels, its executions of CUDA graphs traced whole
(nsys --cuda-graph-trace=graph writes one row per graph execution and no kernel rows for
the graph's nodes), and its device-local copies and memsets (device-to-device, array copies
within the device, memset: memory work of the device itself, not a transfer it waits on).
The devices are those that ran kernels or graphs. The window of a device runs from the start
of its first work to the end of its last. Gaps are the holes in the union; how much of the
idle time transfers on the same device cover (host<->device and peer copies, transfer_union)
is reported too (a "97% idle" trace may really be one long copy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.join import kernel_launch_index, match_calls
from nsys_llm_explainer.metrics.base import Context, Metric
from nsys_llm_explainer.metrics.cuda_graphs import GRAPH_LAUNCH_APIS
from nsys_llm_explainer.metrics.top_kernels import NO_KERNELS
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import TraceData, Unavailable

HISTOGRAM_EDGES_NS = (10_000, 100_000, 1_000_000, 10_000_000)
HISTOGRAM_LABELS = ("<10us", "10-100us", "0.1-1ms", "1-10ms", ">10ms")
DEVICE_COLUMNS = ("device_id", "window_start_ns", "window_end_ns", "busy_ns", "idle_ns", "idle_pct",
                  "gap_count", "idle_covered_by_copies_ns", "idle_covered_by_copies_pct",
                  "kernel_busy_ns", "graph_busy_ns", "device_copy_busy_ns")
# CUPTI_ACTIVITY_MEMCPY_KIND_* that stay inside one device's memory: array-to-array,
# array-to-device, device-to-array, device-to-device (a device-to-device copy between two
# devices is a peer transfer).
DEVICE_LOCAL_COPY_KINDS = (5, 6, 7, 8)
# gpu_work sources
KERNEL, GRAPH, DEVICE_COPY, MEMSET = range(4)
WORK_COLUMNS = ("start", "end", "device", "stream", "pid", "corr", "source", "row")
GAP_COLUMNS = ("device_id", "start_ns", "end_ns", "duration_ns")


@dataclass(frozen=True)
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
    Only devices that ran kernels or graphs keep their copies and memsets (cached)."""

    def build() -> Columns:
        k = data.kernels()
        parts = [(KERNEL, k, np.ones(len(k), dtype=bool))]
        g = _optional(data.graph_execs)
        if g is not None:
            parts.append((GRAPH, g, np.ones(len(g), dtype=bool)))
        compute_devices = np.unique(np.concatenate([p[1].device for p in parts]))
        mc = _optional(data.memcpy)
        if mc is not None:
            parts.append((DEVICE_COPY, mc, device_local_copies(mc) & np.isin(mc.device, compute_devices)))
        ms = _optional(data.memset)
        if ms is not None:
            parts.append((MEMSET, ms, np.isin(ms.device, compute_devices)))
        cols: dict[str, list[np.ndarray]] = {n: [] for n in WORK_COLUMNS}
        for source, c, keep in parts:
            rows = np.flatnonzero(keep)
            for n in ("start", "end", "device", "stream", "pid", "corr"):
                cols[n].append(c[n][rows])
            cols["source"].append(np.full(len(rows), source, dtype=np.int64))
            cols["row"].append(rows.astype(np.int64))
        return Columns("gpu_work", {n: np.concatenate(v).astype(np.int64) for n, v in cols.items()})

    return data.cached("gpu_work", build)


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
        out: dict[int, DeviceBusy] = {}
        for dev in distinct_few(w.device).tolist():
            mine = w.device == dev
            bs, be = intervals.merge(w.start[mine], w.end[mine])
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


def _source_busy(w: Columns, dev: int, sources: tuple[int, ...]) -> int:
    mine = (w.device == dev) & np.isin(w.source, sources)
    return intervals.union_length(w.start[mine], w.end[mine])


def run(ctx: Context) -> Outcome:
    w = gpu_work(ctx.data)
    if not np.isin(w.source, (KERNEL, GRAPH)).any():
        return METRIC.skipped(NO_KERNELS)
    min_gap = int(round(ctx.options.min_gap_us * 1000))
    devices, gap_frames, histograms = [], [], []
    for dev, busy in device_busy(ctx.data).items():
        w0, w1 = busy.window
        busy_ns = int((busy.busy_end - busy.busy_start).sum())
        gap_len = busy.gap_end - busy.gap_start
        us, ue = transfer_union(ctx.data, dev)
        covered = int(intervals.overlap_with_union(busy.gap_start, busy.gap_end, us, ue).sum())
        idle = (w1 - w0) - busy_ns
        devices.append({
            "device_id": dev, "window_start_ns": w0, "window_end_ns": w1,
            "busy_ns": busy_ns, "idle_ns": idle,
            "idle_pct": round(100.0 * idle / (w1 - w0), 2) if w1 > w0 else 0.0,
            "gap_count": int(len(gap_len)),
            "idle_covered_by_copies_ns": covered,
            "idle_covered_by_copies_pct": round(100.0 * covered / idle, 2) if idle > 0 else 0.0,
            "kernel_busy_ns": _source_busy(w, dev, (KERNEL,)),
            "graph_busy_ns": _source_busy(w, dev, (GRAPH,)),
            "device_copy_busy_ns": _source_busy(w, dev, (DEVICE_COPY, MEMSET)),
        })
        counts = np.bincount(np.searchsorted(HISTOGRAM_EDGES_NS, gap_len, side="right"), minlength=5)
        sums = np.bincount(np.searchsorted(HISTOGRAM_EDGES_NS, gap_len, side="right"), weights=gap_len, minlength=5)
        histograms.append({
            "device_id": dev,
            "buckets": [{"label": lab, "count": int(c), "total_ns": int(round(s))}
                        for lab, c, s in zip(HISTOGRAM_LABELS, counts, sums, strict=True)],
        })
        keep = gap_len >= min_gap
        gap_frames.append(pd.DataFrame({
            "device_id": np.full(int(keep.sum()), dev, dtype=np.int64),
            "start_ns": busy.gap_start[keep], "end_ns": busy.gap_end[keep], "duration_ns": gap_len[keep],
        }))
    gaps = pd.concat(gap_frames, ignore_index=True) if gap_frames else pd.DataFrame(columns=list(GAP_COLUMNS))
    gaps = gaps.sort_values(["duration_ns", "device_id", "start_ns"], ascending=[False, True, True], kind="stable")
    top = gaps.head(ctx.options.max_gaps)
    launches, unplaced = graph_launches(ctx.data)
    data = {
        "min_gap_ns": min_gap,
        "graph_launches": launches,
        "unplaced_graph_launches": unplaced,
        "devices": devices,
        "histograms": histograms,
        "gaps_listed": int(len(gaps)),
        "gaps": top.to_dict("records"),
    }
    tables = (
        Table("gpu_idle", DEVICE_COLUMNS, pd.DataFrame(devices, columns=list(DEVICE_COLUMNS))),
        Table("gpu_idle_gaps", GAP_COLUMNS, gaps.sort_values(["device_id", "start_ns"], kind="stable")),
    )
    return MetricResult(METRIC.id, data, tables)


METRIC = Metric(
    id="gpu_idle",
    title="GPU idle time and gaps",
    run=run,
    tables={"gpu_idle": DEVICE_COLUMNS, "gpu_idle_gaps": GAP_COLUMNS},
    description="Per-device busy time (union of kernels, whole-graph executions, device-local copies and "
    "memsets), idle time, gap histogram, largest gaps.",
)
