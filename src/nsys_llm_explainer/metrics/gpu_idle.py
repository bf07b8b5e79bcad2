"""gpu_idle: per device, busy = union of kernel intervals; idle = window - busy.

The window of a device runs from its first kernel start to its last kernel end. Gaps are
the holes in the union; how much of the idle time memcpy/memset activity on the same
device covers is reported too (a "97% idle" trace may really be one long copy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.metrics.base import Context, Metric
from nsys_llm_explainer.metrics.top_kernels import NO_KERNELS
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.trace.data import TraceData, Unavailable

HISTOGRAM_EDGES_NS = (10_000, 100_000, 1_000_000, 10_000_000)
HISTOGRAM_LABELS = ("<10us", "10-100us", "0.1-1ms", "1-10ms", ">10ms")
DEVICE_COLUMNS = ("device_id", "window_start_ns", "window_end_ns", "busy_ns", "idle_ns", "idle_pct",
                  "gap_count", "idle_covered_by_copies_ns", "idle_covered_by_copies_pct")
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


def device_busy(data: TraceData) -> dict[int, DeviceBusy]:
    """Merged kernel intervals and gaps per device (cached: idle causes and plots reuse it)."""

    def build() -> dict[int, DeviceBusy]:
        k = data.kernels()
        out: dict[int, DeviceBusy] = {}
        for dev in distinct_few(k.device).tolist():
            mine = k.device == dev
            bs, be = intervals.merge(k.start[mine], k.end[mine])
            out[int(dev)] = DeviceBusy(int(dev), bs, be, be[:-1], bs[1:])
        return out

    return data.cached("device_busy", build)


def copy_union(data: TraceData, column: str, value: int) -> tuple[np.ndarray, np.ndarray]:
    """Union of the memcpy/memset intervals whose `column` ("device" or "pid") is `value`
    (empty when those tables are absent)."""
    starts, ends = [], []
    for loader in (data.memcpy, data.memset):
        try:
            c = loader()
        except Unavailable:
            continue
        mine = c[column] == value
        starts.append(c.start[mine])
        ends.append(c.end[mine])
    if not starts:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return intervals.merge(np.concatenate(starts), np.concatenate(ends))


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    min_gap = int(round(ctx.options.min_gap_us * 1000))
    devices, gap_frames, histograms = [], [], []
    for dev, busy in device_busy(ctx.data).items():
        w0, w1 = busy.window
        busy_ns = int((busy.busy_end - busy.busy_start).sum())
        gap_len = busy.gap_end - busy.gap_start
        us, ue = copy_union(ctx.data, "device", dev)
        covered = int(intervals.overlap_with_union(busy.gap_start, busy.gap_end, us, ue).sum())
        idle = (w1 - w0) - busy_ns
        devices.append({
            "device_id": dev, "window_start_ns": w0, "window_end_ns": w1,
            "busy_ns": busy_ns, "idle_ns": idle,
            "idle_pct": round(100.0 * idle / (w1 - w0), 2) if w1 > w0 else 0.0,
            "gap_count": int(len(gap_len)),
            "idle_covered_by_copies_ns": covered,
            "idle_covered_by_copies_pct": round(100.0 * covered / idle, 2) if idle > 0 else 0.0,
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
    data = {
        "min_gap_ns": min_gap,
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
    description="Per-device busy time (union of kernel intervals), idle time, gap histogram, largest gaps.",
)
