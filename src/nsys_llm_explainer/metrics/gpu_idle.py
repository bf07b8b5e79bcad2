"""gpu_idle: per device, busy = union of the device's own work (analysis/busy.py); idle =
window - busy.

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

from dataclasses import asdict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.busy import (
    DEVICE_COPY,
    GRAPH,
    KERNEL,
    MEMSET,
    device_busy,
    gpu_work,
    graph_launches,
    transfer_union,
)
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.devices import GapBucket, GapHistogram, GpuIdle, GpuIdleDevice

HISTOGRAM_EDGES_NS = (10_000, 100_000, 1_000_000, 10_000_000)
HISTOGRAM_LABELS = ("<10us", "10-100us", "0.1-1ms", "1-10ms", ">10ms")
DEVICE_COLUMNS = ("device_id", "window_start_ns", "window_end_ns", "busy_ns", "idle_ns", "idle_pct",
                  "gap_count", "idle_covered_by_copies_ns", "idle_covered_by_copies_pct",
                  "kernel_busy_ns", "graph_busy_ns", "device_copy_busy_ns")
GAP_COLUMNS = ("device_id", "start_ns", "end_ns", "duration_ns")


def _source_busy(w: dict[str, np.ndarray], dev: int, sources: tuple[int, ...]) -> int:
    mine = (w["device"] == dev) & np.isin(w["source"], sources)
    return intervals.union_length(w["start"][mine], w["end"][mine])


def run(ctx: Context) -> Outcome:
    work = gpu_work(ctx.data)
    w = {name: work[name] for name in ("device", "source", "start", "end")}  # each read once
    if not np.isin(w["source"], (KERNEL, GRAPH)).any():
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
        devices.append(GpuIdleDevice(
            device_id=dev, window_start_ns=w0, window_end_ns=w1,
            busy_ns=busy_ns, idle_ns=idle,
            idle_pct=round(100.0 * idle / (w1 - w0), 2) if w1 > w0 else 0.0,
            gap_count=int(len(gap_len)),
            idle_covered_by_copies_ns=covered,
            idle_covered_by_copies_pct=round(100.0 * covered / idle, 2) if idle > 0 else 0.0,
            kernel_busy_ns=_source_busy(w, dev, (KERNEL,)),
            graph_busy_ns=_source_busy(w, dev, (GRAPH,)),
            device_copy_busy_ns=_source_busy(w, dev, (DEVICE_COPY, MEMSET)),
        ))
        counts = np.bincount(np.searchsorted(HISTOGRAM_EDGES_NS, gap_len, side="right"), minlength=5)
        sums = np.bincount(np.searchsorted(HISTOGRAM_EDGES_NS, gap_len, side="right"), weights=gap_len, minlength=5)
        histograms.append(GapHistogram(dev, tuple(
            GapBucket(lab, int(c), int(round(s))) for lab, c, s in zip(HISTOGRAM_LABELS, counts, sums, strict=True)
        )))
        keep = gap_len >= min_gap
        gap_frames.append(pd.DataFrame({
            "device_id": np.full(int(keep.sum()), dev, dtype=np.int64),
            "start_ns": busy.gap_start[keep], "end_ns": busy.gap_end[keep], "duration_ns": gap_len[keep],
        }))
    del w
    # Built in (device, start) order, the table's order; the longest gaps (ties: device,
    # start) are found with a stable sort of the keys, copying only the rows listed.
    gaps = pd.concat(gap_frames, ignore_index=True) if gap_frames else pd.DataFrame(columns=list(GAP_COLUMNS))
    del gap_frames
    if len(gaps):
        order = np.lexsort((
            gaps["start_ns"].to_numpy(np.int64), gaps["device_id"].to_numpy(np.int64),
            -gaps["duration_ns"].to_numpy(np.int64),
        ))
        top = gaps.iloc[order[: ctx.options.max_gaps]]
        del order
    else:
        top = gaps
    launches, unplaced = graph_launches(ctx.data)
    result = GpuIdle(
        min_gap_ns=min_gap,
        graph_launches=launches,
        unplaced_graph_launches=unplaced,
        devices=tuple(devices),
        histograms=tuple(histograms),
        gaps_listed=int(len(gaps)),
        gaps=tuple(top.to_dict("records")),
    )
    tables = (
        Table("gpu_idle", DEVICE_COLUMNS,
              pd.DataFrame([asdict(d) for d in devices], columns=list(DEVICE_COLUMNS))),
        Table("gpu_idle_gaps", GAP_COLUMNS, gaps),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, typed=result)


METRIC = Metric(
    id="gpu_idle",
    order=40,
    title="GPU idle time and gaps",
    run=run,
    tables={"gpu_idle": DEVICE_COLUMNS, "gpu_idle_gaps": GAP_COLUMNS},
    description="Per-device busy time (union of kernels, whole-graph executions, device-local copies and "
    "memsets), idle time, gap histogram, largest gaps.",
    reads=("device_busy", "kernel_launch_index", "gpu_work", "work_calls", "transfer_union:"),
)
