"""idle_causes: why each GPU idle gap happened (rules in idle_sweep.py), per device.

Whole gaps are assigned to one cause, so the causes of a device sum to its idle time (the
gpu_idle metric's idle_ns) to the nanosecond. The largest gaps are listed with their cause
and the innermost NVTX range active on the launch thread at the middle of the gap (the
thread that launched the kernel that ended the gap).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import nvtx_tree
from nsys_llm_explainer.analysis.groups import group_sum
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.metrics.base import Context, Metric
from nsys_llm_explainer.metrics.idle_sweep import CAUSES, SYNC_WAIT, GapCauses, gap_causes
from nsys_llm_explainer.metrics.nvtx_attribution import kernel_attribution
from nsys_llm_explainer.metrics.top_kernels import NO_KERNELS
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.trace.data import Unavailable

CAUSE_COLUMNS = ("device_id", "cause", "gaps", "idle_ns", "pct_of_idle")
GAP_COLUMNS = (
    "device_id",
    "start_ns",
    "end_ns",
    "duration_ns",
    "cause",
    "refill_ns",
    "copy_cover_pct",
    "launch_cover_pct",
    "outside_host_pct",
    "next_kernel_queued",
)


def _json_value(v: Any) -> Any:
    """Missing values (None, NaN, pd.NA) -> None; numpy scalars -> Python."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _pct(part: np.ndarray, whole: np.ndarray) -> np.ndarray:
    return np.round(100.0 * part / np.maximum(whole, 1), 2)


def _device_row(gc: GapCauses) -> dict[str, Any]:
    length = gc.length
    idle = int(length.sum())
    ns = group_sum(length, gc.cause, len(CAUSES))
    count = np.bincount(gc.cause, minlength=len(CAUSES))
    refill = gc.refill_ns[gc.cause == SYNC_WAIT]
    p = percentiles(refill, (50, 90))
    dominant = int(np.argmax(ns)) if idle else None
    return {
        "device_id": gc.device_id,
        "owner_pids": [int(x) for x in gc.owners],
        "idle_ns": idle,
        "gap_count": int(len(length)),
        "dominant_cause": CAUSES[dominant] if dominant is not None else None,
        "causes": [
            {
                "cause": c,
                "gaps": int(count[i]),
                "idle_ns": int(ns[i]),
                "pct_of_idle": round(100.0 * int(ns[i]) / idle, 2) if idle else 0.0,
            }
            for i, c in enumerate(CAUSES)
        ],
        "queued_gaps": int(gc.queued.sum()),
        "queued_ns": int(length[gc.queued].sum()),
        "refill": {
            "gaps": int(len(refill)),
            "total_ns": int(refill.sum()),
            "p50_ns": p[50],
            "p90_ns": p[90],
            "max_ns": int(refill.max()) if len(refill) else 0,
        },
    }


def _gap_frame(gc: GapCauses, keep: np.ndarray) -> pd.DataFrame:
    length = gc.length[keep]
    return pd.DataFrame(
        {
            "device_id": np.full(int(keep.sum()), gc.device_id, dtype=np.int64),
            "start_ns": gc.gap_start[keep],
            "end_ns": gc.gap_end[keep],
            "duration_ns": length,
            "cause": np.array(CAUSES, dtype=object)[gc.cause[keep]],
            "refill_ns": np.where(gc.refill_ns[keep] >= 0, gc.refill_ns[keep], pd.NA),
            "copy_cover_pct": _pct(gc.copy_cover[keep], length),
            "launch_cover_pct": _pct(gc.launch_cover[keep], length),
            "outside_host_pct": _pct(gc.outside_host[keep], length),
            "next_kernel_queued": gc.queued[keep],
            "next_kernel": gc.next_kernel[keep],
        }
    )


def _nvtx_at_gaps(ctx: Context, top: pd.DataFrame) -> list[str | None]:
    """Innermost NVTX range on the launch thread of the kernel that ends each gap, at its middle."""
    if top.empty:
        return []
    data = ctx.data
    try:
        nv = data.nvtx()
    except Unavailable:
        return [None] * len(top)
    if len(nv) == 0:
        return [None] * len(top)
    row = kernel_launch_index(data)[top["next_kernel"].to_numpy(np.int64)]
    tkey = np.where(row >= 0, data.runtime().tkey[np.maximum(row, 0)], -1)
    mid = (top["start_ns"].to_numpy(np.int64) + top["end_ns"].to_numpy(np.int64)) // 2
    index = kernel_attribution(data).index
    hit = nvtx_tree.innermost(index, tkey, mid, mid)
    names = data.nvtx_names()
    return [names[int(nv.name[index.order[h]])] if h >= 0 else None for h in hit.tolist()]


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    rt = ctx.data.runtime()
    if len(rt) == 0:
        return METRIC.skipped(
            "the CUDA API table is empty, so what the host did during GPU idle gaps is unknown"
        )
    min_gap = int(round(ctx.options.min_gap_us * 1000))
    causes = gap_causes(ctx.data)
    devices = [_device_row(gc) for gc in causes.values()]
    frames = [_gap_frame(gc, gc.length >= min_gap) for gc in causes.values()]
    gaps = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(GAP_COLUMNS))
    )
    top = (
        gaps.sort_values(
            ["duration_ns", "device_id", "start_ns"], ascending=[False, True, True], kind="stable"
        )
        .head(ctx.options.max_gaps)
        .reset_index(drop=True)
    )
    top = top.assign(nvtx_range=_nvtx_at_gaps(ctx, top)).drop(columns=["next_kernel"])
    rows = [
        {
            **d,
            "cause": c["cause"],
            "gaps": c["gaps"],
            "idle_ns": c["idle_ns"],
            "pct_of_idle": c["pct_of_idle"],
        }
        for d in devices
        for c in d["causes"]
    ]
    data = {
        "causes": list(CAUSES),
        "min_gap_ns": min_gap,
        "devices": devices,
        "gaps_listed": int(len(gaps)),
        "top_gaps": [{key: _json_value(v) for key, v in r.items()} for r in top.to_dict("records")],
    }
    tables = (
        Table("idle_causes", CAUSE_COLUMNS, pd.DataFrame(rows, columns=list(CAUSE_COLUMNS))),
        Table(
            "idle_causes_gaps",
            GAP_COLUMNS,
            gaps.sort_values(["device_id", "start_ns"], kind="stable"),
        ),
    )
    return MetricResult(METRIC.id, data, tables)


METRIC = Metric(
    id="idle_causes",
    title="Why the GPU was idle",
    run=run,
    tables={"idle_causes": CAUSE_COLUMNS, "idle_causes_gaps": GAP_COLUMNS},
    description="Every GPU idle gap classified: sync_wait, memcpy, launch_bound, host_other, "
    "capture_edge.",
)
