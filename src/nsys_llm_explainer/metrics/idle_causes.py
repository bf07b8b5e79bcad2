"""idle_causes: every nanosecond of GPU idle time, per device, split by what covered it
(precedence rules in idle_sweep.py): transfer, communication, sync_wait, launch_bound,
capture_edge, host_other, device_wait. The causes of a device sum to the gpu_idle metric's
idle_ns to the nanosecond.

Also per device: how many gaps ended with work whose launch time is known (a launch row, or
launched before the capture), how many of those with work that was already queued (launched
before the gap: the GPU waited on a device-side dependency, not on the host) and, of those,
how many had a transfer ahead of the work on its own stream; the refill delay after blocking
calls; transfers outside the work window (before the first or after the last work: time the
device spent copying that the work window does not show); what the owning processes'
blocking calls overlapped on the device and its transfers by kind (analysis/idle_sweep.py);
what the launching thread was doing during the host-caused idle time (sync_wait,
launch_bound, host_other): its top sources by time, their families and, where no range
names it, the CPU samples (analysis/host_sources.py);
and the same split restricted to the steady part of the capture (after the last start-up
event the capture metric found). The largest gaps are listed with their split and the
innermost NVTX range active on the launch thread at the middle of the gap (its
normalized name, analysis/nvtx).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import host_sources, intervals, nvtx
from nsys_llm_explainer.analysis.busy import GRAPH, KERNEL, device_busy, gpu_work, transfer_union
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.idle_sweep import (
    CAUSES,
    HOST_SIDE,
    NO_REFILL,
    GapCauses,
    gap_causes,
    host_blocked,
    transfers,
)
from nsys_llm_explainer.analysis.join import kernel_attribution
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.devices import (
    CauseShare,
    FamilyTime,
    HostBlocked,
    HostSources,
    IdleCauses,
    IdleDevice,
    IdleTransfer,
    Refill,
    SampleCount,
    SteadyPart,
)
from nsys_llm_explainer.results.run import Steps
from nsys_llm_explainer.trace.data import Unavailable

CAUSE_COLUMNS = ("device_id", "cause", "idle_ns", "pct_of_idle", "pct_of_window", "gaps")
GAP_COLUMNS = (
    "device_id", "start_ns", "end_ns", "duration_ns", "cause",
    *(f"{c}_ns" for c in CAUSES),
    "refill_ns", "next_kernel_queued", "copy_ahead",
)


def _json_value(v: Any) -> Any:
    """Missing values (None, NaN, pd.NA) -> None; numpy scalars -> Python."""
    if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)):
        return None
    return v.item() if isinstance(v, np.generic) else v


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


def _steady(gc: GapCauses, start: int | None, window_end: int) -> SteadyPart | None:
    """The split restricted to [start, window end] (None without a steady start)."""
    if start is None or start >= window_end:
        return None
    w0 = np.array([start]), np.array([window_end])
    ns = {c: int(intervals.overlap_with_union(*w0, s, e)[0]) for c, (s, e) in zip(CAUSES, gc.segments, strict=True)}
    return SteadyPart(int(start), sum(ns.values()), ns)


def _activity(ctx: Context, dev: int, w0: int, w1: int) -> tuple[int, int, int]:
    """The device's activity window (its work and transfers) and transfer time outside [w0, w1]."""
    cs, ce = transfer_union(ctx.data, dev)
    a0 = min(w0, int(cs[0])) if len(cs) else w0
    a1 = max(w1, int(ce[-1])) if len(ce) else w1
    outside = intervals.subtract(cs, ce, np.array([w0]), np.array([w1]))
    return a0, a1, int((outside[1] - outside[0]).sum())


def _device_row(ctx: Context, gc: GapCauses, steady_start: int | None) -> IdleDevice:
    length = gc.length
    idle = int(length.sum())
    per_cause = gc.cause_total_ns if len(length) else np.zeros(len(CAUSES), np.int64)
    dominant = gc.cause
    count = np.bincount(dominant, minlength=len(CAUSES)) if len(dominant) else np.zeros(len(CAUSES), np.int64)
    w0, w1 = device_busy(ctx.data)[gc.device_id].window
    window = w1 - w0
    refill = gc.refill_ns
    p = percentiles(refill, (50, 90))
    a0, a1, edge = _activity(ctx, gc.device_id, w0, w1)
    return IdleDevice(
        device_id=gc.device_id,
        owner_pids=tuple(int(x) for x in gc.owners),
        window_ns=window,
        idle_ns=idle,
        gap_count=int(len(length)),
        dominant_cause=CAUSES[int(np.argmax(per_cause))] if idle else None,
        causes=tuple(
            CauseShare(
                cause=c,
                idle_ns=int(per_cause[i]),
                pct_of_idle=_pct(int(per_cause[i]), idle),
                pct_of_window=_pct(int(per_cause[i]), window),
                gaps=int(count[i]),
            )
            for i, c in enumerate(CAUSES)
        ),
        launch_known_gaps=int(gc.known.sum()),
        queued_gaps=int(gc.queued.sum()),
        queued_ns=int(length[gc.queued].sum()),
        copy_ahead_gaps=int(gc.copy_ahead.sum()),
        copy_ahead_ns=int(length[gc.copy_ahead].sum()),
        dependency_ns=gc.dependency_ns,
        behind_collective_ns=gc.behind_collective_ns,
        stream_wait_ns=gc.stream_wait_ns,
        refill=Refill(
            gaps=int(len(refill)),
            total_ns=int(refill.sum()),
            p50_ns=p[50],
            p90_ns=p[90],
            max_ns=int(refill.max()) if len(refill) else 0,
        ),
        activity_start_ns=a0,
        activity_end_ns=a1,
        edge_transfer_ns=edge,
        host_blocked=HostBlocked(**host_blocked(ctx.data, gc, w0, w1)),
        host_sources=_host_sources(ctx, gc, window),
        transfers=tuple(IdleTransfer(**t) for t in transfers(ctx.data, gc)),
        steady=_steady(gc, steady_start, w1),
    )


def _step_ranges(ctx: Context) -> set[str]:
    steps = ctx.typed(Steps)
    return host_sources.step_range_names(ctx.data, ctx.options.step_range, steps.ranges if steps else ())


def _host_sources(ctx: Context, gc: GapCauses, window: int) -> HostSources:
    """What the launching thread did during the device's host-caused idle time
    (analysis/host_sources.py): the top sources, the families, the CPU samples."""
    skip = _step_ranges(ctx)
    ds = host_sources.device_sources(ctx.data, gc, HOST_SIDE, skip, window)
    return HostSources(
        idle_ns=ds.idle_ns,
        unnamed_ns=ds.unnamed_ns,
        sources=tuple(ds.sources[: host_sources.TOP_SOURCES]),
        families=tuple(FamilyTime(f, ns) for f, ns in ds.families.items()),
        samples=tuple(SampleCount(k, n) for k, n in list(ds.samples.items())[: host_sources.TOP_SOURCES]),
    )


def _gap_frame(gc: GapCauses, keep: np.ndarray) -> pd.DataFrame:
    cols: dict[str, np.ndarray] = {
        "device_id": np.full(int(keep.sum()), gc.device_id, dtype=np.int64),
        "start_ns": gc.gap_start[keep],
        "end_ns": gc.gap_end[keep],
        "duration_ns": gc.length[keep],
        # the causes' values as plain strings (an IdleCause is a str subclass, slower to write)
        "cause": np.array([c.value for c in CAUSES], dtype=object)[gc.cause[keep]],
    }
    per_cause = gc.cause_ns(keep)
    for i, c in enumerate(CAUSES):
        cols[f"{c}_ns"] = per_cause[i]
    refill = gc.refill_of(keep)
    cols["refill_ns"] = np.where(refill != NO_REFILL, refill, pd.NA)
    cols["next_kernel_queued"] = gc.queued[keep]
    cols["copy_ahead"] = gc.copy_ahead[keep]
    cols["next_call"] = gc.next_call[keep]
    return pd.DataFrame(cols)


def _nvtx_at_gaps(ctx: Context, top: pd.DataFrame) -> list[str | None]:
    """Innermost NVTX range on the launch thread of the work that ends each gap, at its
    middle, by normalized name."""
    if top.empty:
        return []
    data = ctx.data
    try:
        nv = data.nvtx()
    except Unavailable:
        return [None] * len(top)
    if len(nv) == 0:
        return [None] * len(top)
    row = top["next_call"].to_numpy(np.int64)
    tkey = np.where(row >= 0, data.runtime().tkey[np.maximum(row, 0)], -1)
    mid = (top["start_ns"].to_numpy(np.int64) + top["end_ns"].to_numpy(np.int64)) // 2
    index = kernel_attribution(data).index
    hit = nvtx.innermost(index, tkey, mid, mid)
    names = data.nvtx_names()
    return [normalize(names[int(nv.name[index.order[h]])]) if h >= 0 else None for h in hit.tolist()]


def _by_device_and_start(gaps: pd.DataFrame) -> pd.DataFrame:
    """`gaps` in (device, start) order; it is built in that order, and then is not copied."""
    dev, start = gaps["device_id"].to_numpy(np.int64), gaps["start_ns"].to_numpy(np.int64)
    ordered = bool(((dev[1:] > dev[:-1]) | ((dev[1:] == dev[:-1]) & (start[1:] >= start[:-1]))).all())
    return gaps if ordered else gaps.sort_values(["device_id", "start_ns"], kind="stable")


def steady_start(ctx: Context) -> int | None:
    """Where the steady part of the capture begins (capture metric), or None."""
    cap = ctx.result("capture")
    return cap.data.get("steady_start_ns") if cap is not None else None


def run(ctx: Context) -> Outcome:
    if not np.isin(gpu_work(ctx.data).source, (KERNEL, GRAPH)).any():
        return METRIC.skipped(NO_KERNELS)
    rt = ctx.data.runtime()
    if len(rt) == 0:
        return METRIC.skipped(
            "the CUDA API table is empty, so what the host did during GPU idle gaps is unknown"
        )
    min_gap = int(round(ctx.options.min_gap_us * 1000))
    causes = gap_causes(ctx.data)
    start = steady_start(ctx)
    devices = [_device_row(ctx, gc, start) for gc in causes.values()]
    frames = [_gap_frame(gc, gc.length >= min_gap) for gc in causes.values()]
    gaps = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*GAP_COLUMNS, "next_call"])
    )
    del frames
    # The longest gaps (ties: device, then start): a stable sort of the three keys, of which
    # only the first rows are copied (the table can hold millions of gaps).
    if len(gaps):
        order = np.lexsort((
            gaps["start_ns"].to_numpy(np.int64), gaps["device_id"].to_numpy(np.int64),
            -gaps["duration_ns"].to_numpy(np.int64),
        ))
        top = gaps.iloc[order[: ctx.options.max_gaps]].reset_index(drop=True)
        del order
    else:
        top = gaps.head(0).reset_index(drop=True)
    top = top.assign(nvtx_range=_nvtx_at_gaps(ctx, top)).drop(columns=["next_call"])
    rows = [{"device_id": d.device_id, **asdict(c)} for d in devices for c in d.causes]
    result = IdleCauses(
        causes=CAUSES,
        min_gap_ns=min_gap,
        devices=tuple(devices),
        gaps_listed=int(len(gaps)),
        top_gaps=tuple({key: _json_value(v) for key, v in r.items()} for r in top.to_dict("records")),
    )
    tables = (
        Table("idle_causes", CAUSE_COLUMNS, pd.DataFrame(rows, columns=list(CAUSE_COLUMNS))),
        Table("idle_causes_gaps", GAP_COLUMNS, _by_device_and_start(gaps)),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, typed=result)


METRIC = Metric(
    id="idle_causes",
    order=130,
    title="Why the GPU was idle",
    run=run,
    tables={"idle_causes": CAUSE_COLUMNS, "idle_causes_gaps": GAP_COLUMNS},
    description="Every nanosecond of GPU idle time split by what covered it: transfer, "
    "communication, sync_wait, launch_bound, capture_edge, host_other, device_wait.",
    after=("capture", "steps"),
    reads=(
        "runtime", "host_rows", "gap_causes", "device_busy", "kernel_launch_index",
        "kernel_attribution", "comm_mask", "gpu_work", "work_calls", "work_launch_times",
        "transfer_union:", "host_source_names:", "readbacks", "draining_calls", "nvtx_normalized",
    ),
)
