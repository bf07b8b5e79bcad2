"""steps: step timing per phase, with the slow steps and what made them slow.

A step is the outermost repeating unit of work (analysis/steps.py): a ProfilerStep, a
serving or training iteration, not the layers inside it. Steps come from --step-range, else
the phase map, else the trace's own step ranges (PyTorch profiler ProfilerStep#N;
phase_scope.py), else automatic detection (analysis/steps.py: the outermost repeating NVTX
range, else the repeating launch sequence with a step boundary, else blocking syncs), run on
each process: the steps of a multi-process capture are those of every process that has them,
numbered process by process. One step captured is reported as one step.

Latency = step end - step start on the host (NVTX: the range; automatic: launch call start of
the step's first kernel to that of the next step's first kernel, or sync return to sync
return). Each step also has the GPU window of its own work (analysis.steps own_windows()): from the
first start to the last end of the kernels launched inside it, or the step's GPU-side
annotation when the trace has one (PyTorch profiler gpu_user_annotation ProfilerStep#N); the
host range can begin with a synchronize that waits for the previous step's kernels. Per-step
figures (MFU, MBU, in-step kernel time) use that window (gpu_latency_ns) and the kernels
launched in the step (kernel_ns). `layers` reports a unit that repeats back to back inside
the steps (analysis.steps nested()). An outlier is a step longer than OUTLIER_FACTOR x its phase's
median host latency.

Work queued before the capture (analysis/carried.py: kernels whose launch the capture does
not hold, run ahead of the first recorded launch of their stream) is in no step: not in a
step's kernels, kernel time, GPU window or GPU busy time. `carried` reports it (kernels,
summed kernel time, their busy union, when the last one ended, devices).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import NotRequired, TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals, iterations
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.iterations import Iterations
from nsys_llm_explainer.analysis.join import launch_first_kernels
from nsys_llm_explainer.analysis.phase_scope import STEP_PHASE, instance_bounds, phase_scope
from nsys_llm_explainer.analysis.stats import (
    group_modes,
    group_percentiles,
    modes_text,
    percentiles,
    sort_within_groups,
)
from nsys_llm_explainer.analysis.steps import (
    CONFIDENCE_RANK,
    MIN_STEPS,
    Detected,
    OwnWindows,
    detect_all,
    explain_outliers,
    layers_of,
    layers_only,
    own_windows,
)
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.run import CarriedWork, StepLayers, StepOutlier, StepPhase, Steps
from nsys_llm_explainer.trace.data import Unavailable

OUTLIER_FACTOR = 2.0
TOKEN_PEERS = 2  # a serving iteration is compared with those of its phase within 2x its tokens
MAX_OUTLIERS_LISTED = 20
STEP_COLUMNS = (
    "step",
    "phase",
    "pid",
    "start_ns",
    "end_ns",
    "latency_ns",
    "gpu_start_ns",
    "gpu_end_ns",
    "gpu_latency_ns",
    "kernels",
    "launches",
    "kernel_ns",
    "gpu_busy_ns",
    "outlier",
)
PHASE_COLUMNS = (
    "phase",
    "steps",
    "p50_ns",
    "p90_ns",
    "p99_ns",
    "max_ns",
    "steps_per_s",
    "gpu_p50_ns",
    "kernels_per_step",
    "launches_per_step",
    "kernel_ns_per_step",
    "gpu_busy_pct",
    "between_p50_ns",
    "between_total_ns",
    "outliers",
    "multimodal",
    "modes",
)


class StepSource(TypedDict):
    """How the steps were found (Steps' method, confidence, detail), with what automatic
    detection found beside them: the layer structure and the ranges that mark the steps."""

    method: str
    confidence: str
    detail: str
    layers: NotRequired[dict[str, int] | None]
    ranges: NotRequired[list[str]]


def _iteration_source(its: Iterations) -> tuple[StepSource, pd.DataFrame, np.ndarray]:
    """Steps that are the serving iterations the capture marks (analysis/iterations.py)."""
    info: StepSource = {"method": "serving_iterations", "confidence": "high", "detail": its.detail}
    frame = pd.DataFrame({
        "phase": [it.phase or STEP_PHASE for it in its.items],
        "pid": np.array([it.pid for it in its.items], dtype=np.int64),
        "start_ns": np.array([it.start for it in its.items], dtype=np.int64),
        "end_ns": np.array([it.end for it in its.items], dtype=np.int64),
        "name": [it.name for it in its.items],
        "tokens": np.array([-1 if it.tokens is None else it.tokens for it in its.items], dtype=np.int64),
    })
    return info, frame, its.kernels.unpack().astype(np.int64)


def _source(ctx: Context) -> tuple[StepSource, pd.DataFrame, np.ndarray] | str:
    """Step table (step, phase, pid, start_ns, end_ns) + kernel->step, or why there is none."""
    scope = phase_scope(ctx)
    if scope is None or scope.source == "profiler_step":
        its = iterations.find(ctx.data)
        if its is not None and its.from_marks:
            return _iteration_source(its)
    if scope is not None and len(scope.instances):
        start, end, pid = instance_bounds(ctx, scope)
        method = {"step_range": "nvtx_step_range", "profiler_step": "profiler_step"}.get(
            scope.source, "nvtx_phase_map"
        )
        info: StepSource = {
            "method": method,
            "confidence": "high",
            "detail": f"{len(start)} NVTX ranges"
            + (
                f" named {ctx.options.step_range!r}"
                if ctx.options.step_range
                else " mapped by the phase map"
                if scope.source == "phase_map"
                else f" marked as steps by the {ctx.data.format_name} (ProfilerStep#N)"
            ),
        }
        phase = np.array(scope.phases, dtype=object)[scope.instance_phase]
        names = ctx.data.nvtx_names()
        rows = scope.att.index.order[scope.instances]
        frame = pd.DataFrame({"phase": phase, "pid": pid, "start_ns": start, "end_ns": end,
                              "name": [names[int(x)] for x in ctx.data.nvtx().name[rows]]})
        return info, frame, scope.kernel_instance()
    if ctx.options.step_range:
        return f"no NVTX range is named {ctx.options.step_range!r} (--step-range)"
    found = detect_all(ctx.data)
    if not found:
        k = ctx.data.kernels()
        layers = [x for x in (layers_only(ctx.data, int(p)) for p in np.unique(k.pid).tolist()) if x]
        if layers:
            return "no complete step: " + "; ".join(layers)
        return (
            f"no steps found: no phase map or --step-range, and neither a repeating NVTX range, nor a "
            f"repeating launch sequence, nor at least {MIN_STEPS} launch-closing blocking syncs were found"
        )
    info = _detected_info(found)
    if scope is not None:
        info["detail"] += "; the phase map matched no NVTX range"
    frame = pd.concat(
        [pd.DataFrame({"phase": STEP_PHASE, "pid": d.pid, "start_ns": d.start, "end_ns": d.end}) for d in found],
        ignore_index=True,
    )
    kernel_step = np.full(len(ctx.data.kernels()), -1, dtype=np.int64)
    first = 0
    for d in found:
        mine = d.kernel_step >= 0
        kernel_step[mine] = d.kernel_step[mine] + first
        first += len(d.start)
    return info, frame, kernel_step


def _detected_info(found: list[Detected]) -> StepSource:
    """method, confidence, detail of automatic steps: those of the one process, or per process
    (method of the process with the most kernels, the lowest confidence of all)."""
    if len(found) == 1:
        d = found[0]
        return {"method": d.method, "confidence": d.confidence, "detail": d.detail, "layers": d.layers,
                "ranges": [d.range_name] if d.range_name else []}
    conf = min((d.confidence for d in found), key=CONFIDENCE_RANK.__getitem__)
    parts = [
        f"pid {d.pid}: {len(d.start)} steps, {d.detail}"
        + (f" (confidence {d.confidence})" if d.confidence != conf else "")
        for d in found
    ]
    detail = f"found in each of {len(found)} processes on its own; " + "; ".join(parts)
    return {"method": found[0].method, "confidence": conf, "detail": detail,
            "ranges": sorted({d.range_name for d in found if d.range_name})}


def _per_step(ctx: Context, frame: pd.DataFrame, kernel_step: np.ndarray) -> pd.DataFrame:
    k = ctx.data.kernels()
    n = len(frame)
    hit = kernel_step >= 0
    frame = frame.assign(
        step=np.arange(n),
        latency_ns=frame["end_ns"] - frame["start_ns"],
        kernels=np.bincount(kernel_step[hit], minlength=n),
    )
    pstep = kernel_step[launch_first_kernels(ctx.data)]
    frame["launches"] = np.bincount(pstep[pstep >= 0], minlength=n)
    busy = np.zeros(n, dtype=np.int64)
    own = ~carried(ctx.data).mask  # work queued before the capture is in no step
    for pid in np.unique(frame["pid"]).tolist():
        sel = (frame["pid"] == pid).to_numpy()
        mine = (k.pid == pid) & own
        us, ue = intervals.merge(k.start[mine], k.end[mine])
        busy[sel] = intervals.overlap_with_union(
            frame["start_ns"].to_numpy(np.int64)[sel],
            frame["end_ns"].to_numpy(np.int64)[sel],
            us,
            ue,
        )
    windows = own_windows(ctx.data, kernel_step, n)
    gs, ge = _gpu_annotation_windows(ctx, frame, windows)
    frame["gpu_start_ns"] = gs
    frame["gpu_end_ns"] = ge
    frame["gpu_latency_ns"] = np.where(gs >= 0, ge - gs, 0)
    frame["kernel_ns"] = windows.kernel_ns
    frame["gpu_busy_ns"] = busy
    frame["phase_p50_ns"] = _phase_medians(frame)
    frame["outlier"] = frame["latency_ns"] > OUTLIER_FACTOR * frame["phase_p50_ns"]
    return frame


def _gpu_annotation_windows(ctx: Context, frame: pd.DataFrame,
                            own: OwnWindows) -> tuple[np.ndarray, np.ndarray]:
    """Per step: its GPU window: the GPU-side annotation with the step range's name where the
    trace has one (PyTorch profiler ProfilerStep#N), else the window of its own kernels."""
    gs, ge = own.gpu_start.copy(), own.gpu_end.copy()
    names = frame["name"].to_numpy() if "name" in frame else None
    if names is None:
        return gs, ge
    try:
        ann = ctx.data.gpu_annotations()
    except Unavailable:
        return gs, ge
    labels = ctx.data.gpu_annotation_names()
    by_name: dict[str, tuple[int, int]] = {}
    for i in range(len(ann)):
        key = labels[int(ann.name[i])]
        s0, e0 = by_name.get(key, (int(ann.start[i]), int(ann.end[i])))
        by_name[key] = (min(s0, int(ann.start[i])), max(e0, int(ann.end[i])))
    for j, name in enumerate(names.tolist()):
        if name in by_name:
            gs[j], ge[j] = by_name[name]
    return gs, ge


def _annotated(ctx: Context, steps: pd.DataFrame) -> bool:
    """Whether the steps' GPU windows come from GPU-side annotations."""
    if "name" not in steps:
        return False
    try:
        labels = set(ctx.data.gpu_annotation_names()) if len(ctx.data.gpu_annotations()) else set()
    except Unavailable:
        return False
    return bool(labels) and bool(set(steps["name"]) & labels)


def _phase_medians(frame: pd.DataFrame) -> np.ndarray:
    """Per step: its phase's p50 latency (nearest rank, the same p50 the phase row shows).
    A serving iteration whose new tokens are known is compared with its peers only: the
    iterations of its phase whose tokens are within TOKEN_PEERS x of its own."""
    codes, uniq = pd.factorize(frame["phase"], sort=False)
    lat = frame["latency_ns"].to_numpy(np.int64)
    p50 = group_percentiles(lat, codes, len(uniq), (50,))[50]
    out = p50[codes]
    if "tokens" not in frame:
        return out
    tokens = frame["tokens"].to_numpy(np.int64)
    for c in range(len(uniq)):
        mine = np.flatnonzero((codes == c) & (tokens > 0))
        for t in np.unique(tokens[mine]).tolist():
            peers = mine[(tokens[mine] * TOKEN_PEERS >= t) & (tokens[mine] <= TOKEN_PEERS * t)]
            out[mine[tokens[mine] == t]] = percentiles(lat[peers], (50,))[50]
    return out


def _phase_row(phase: str, g: pd.DataFrame) -> StepPhase:
    lat = g["latency_ns"].to_numpy(np.int64)
    p = percentiles(lat, (25, 50, 75, 90, 99))
    # Steps that alternate between two kinds (e.g. decode steps with and without a prefill
    # chunk) have a p50 that describes neither; the modes say so.
    modes = group_modes(sort_within_groups(lat, np.zeros(len(lat), dtype=np.int64), 1))[0]
    g = g.sort_values(["pid", "start_ns"], kind="stable")
    s, e = g["start_ns"].to_numpy(np.int64), g["end_ns"].to_numpy(np.int64)
    same = g["pid"].to_numpy()[1:] == g["pid"].to_numpy()[:-1]
    between = np.maximum(s[1:] - e[:-1], 0)[same]
    span = int(e.max() - s.min())
    pids = g["pid"].to_numpy()
    # Each process's steps are unioned on their own: two replicas stepping at once are not one.
    covered = sum(intervals.union_length(s[pids == p], e[pids == p]) for p in distinct_few(pids))
    return StepPhase(
        phase=phase,
        steps=int(len(g)),
        p25_ns=p[25],
        p50_ns=p[50],
        p75_ns=p[75],
        p90_ns=p[90],
        p99_ns=p[99],
        max_ns=int(lat.max()),
        steps_per_s=round(len(g) / (span / 1e9), 3) if span > 0 else None,
        gpu_p50_ns=percentiles(g["gpu_latency_ns"].to_numpy(np.int64), (50,))[50],
        kernels_per_step=round(float(g["kernels"].mean()), 2),
        launches_per_step=round(float(g["launches"].mean()), 2),
        kernel_ns_per_step=int(round(float(g["kernel_ns"].mean()))),
        total_ns=int(lat.sum()),
        gpu_busy_pct=round(100.0 * int(g["gpu_busy_ns"].sum()) / covered, 2) if covered else 0.0,
        gpu_busy_ns=int(g["gpu_busy_ns"].sum()),
        between_p50_ns=percentiles(between, (50,))[50],
        between_total_ns=int(between.sum()),
        outliers=int(g["outlier"].sum()),
        multimodal=len(modes) > 1,
        modes=list(modes),
    )


def _phase_table(phases: list[StepPhase]) -> pd.DataFrame:
    frame = pd.DataFrame([asdict(p) for p in phases], columns=list(PHASE_COLUMNS))
    return frame.assign(modes=frame["modes"].map(modes_text))


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    if len(ctx.data.runtime()) == 0:
        return METRIC.skipped("the CUDA API table is empty, so launches cannot be placed in steps")
    found = _source(ctx)
    if isinstance(found, str):
        return METRIC.skipped(found)
    info, frame, kernel_step = found
    kernel_step = np.where(carried(ctx.data).mask, -1, kernel_step)
    if len(frame) < 1:
        return METRIC.skipped("no complete step was found")
    steps = _per_step(ctx, frame.reset_index(drop=True), kernel_step)
    phases = [_phase_row(str(ph), g) for ph, g in steps.groupby("phase", sort=False)]
    outliers = steps[steps["outlier"]]
    outliers = outliers.assign(ratio=outliers["latency_ns"] / outliers["phase_p50_ns"])
    top = outliers.sort_values("ratio", ascending=False, kind="stable").head(MAX_OUTLIERS_LISTED)
    layers = info.pop("layers", None) or layers_of(ctx.data, kernel_step, len(steps))
    ranges = info.pop("ranges", None)
    if ranges is None:
        ranges = sorted({str(n) for n in frame["name"]}) if "name" in frame else []
    cw = carried(ctx.data)
    result = Steps(
        method=info["method"],
        confidence=info["confidence"],
        detail=info["detail"],
        outlier_factor=OUTLIER_FACTOR,
        step_count=int(len(steps)),
        window="gpu_annotation" if _annotated(ctx, steps) else "own_kernels",
        layers=None if layers is None else StepLayers(**layers),
        ranges=tuple(ranges),
        phases=tuple(phases),
        outliers=tuple(StepOutlier(**o) for o in explain_outliers(ctx, top, kernel_step)),
        carried=CarriedWork(cw.kernels, cw.kernel_ns, cw.busy_ns, cw.end_ns, cw.devices),
    )
    notes: tuple[str, ...] = ()
    if result.confidence == "low":
        notes = (
            "steps were detected automatically with low confidence; pass --step-range or a phase "
            "map",
        )
    tables = (
        Table("steps", STEP_COLUMNS, steps),
        Table("steps_phases", PHASE_COLUMNS, _phase_table(phases)),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, notes, typed=result)


METRIC = Metric(
    id="steps",
    # before capture: enough data is judged by repeated steps
    order=110,
    title="Steps and phases",
    run=run,
    tables={"steps": STEP_COLUMNS, "steps_phases": PHASE_COLUMNS},
    description="Steps (the outermost repeating unit, not its layers) per phase: latency on the host and "
    "of each step's own GPU work, steps/s, kernels/step, outliers.",
    reads=(
        "runtime", "host_rows", "gap_causes", "device_busy", "launch_first_kernels",
        "kernel_launch_index", "kernel_attribution", "comm_mask", "carried", "serving_iterations",
        "nvtx_normalized",
    ),
)
