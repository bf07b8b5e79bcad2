"""steps: serving-step timing per phase, with the slow steps and what made them slow.

Steps come from --step-range, else the phase map, else the trace's own step ranges (PyTorch
profiler ProfilerStep#N; phase_scope.py), else automatic detection (steps_detect.py), run on
each process: the steps of a multi-process capture are those of every process that has them,
numbered process by process. Latency = step end - step start (NVTX: the range; automatic: launch call
start of the step's first kernel to that of the next step's first kernel, or sync return
to sync return). An outlier is a step longer than OUTLIER_FACTOR x its phase's median.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.launch_pairs import launch_pairs
from nsys_llm_explainer.analysis.modes import group_modes, modes_text
from nsys_llm_explainer.analysis.phase_scope import STEP_PHASE, instance_bounds, phase_scope
from nsys_llm_explainer.analysis.stats import group_percentiles, percentiles, sort_within_groups
from nsys_llm_explainer.analysis.steps_detect import CONFIDENCE_RANK, MIN_STEPS, Detected, detect_all
from nsys_llm_explainer.analysis.steps_explain import explain_outliers
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table

OUTLIER_FACTOR = 2.0
MAX_OUTLIERS_LISTED = 20
STEP_COLUMNS = (
    "step",
    "phase",
    "pid",
    "start_ns",
    "end_ns",
    "latency_ns",
    "kernels",
    "launches",
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
    "kernels_per_step",
    "launches_per_step",
    "gpu_busy_pct",
    "between_p50_ns",
    "between_total_ns",
    "outliers",
    "multimodal",
    "modes",
)


def _source(ctx: Context) -> tuple[dict[str, Any], pd.DataFrame, np.ndarray] | str:
    """Step table (step, phase, pid, start_ns, end_ns) + kernel->step, or why there is none."""
    scope = phase_scope(ctx)
    if scope is not None and len(scope.instances):
        start, end, pid = instance_bounds(ctx, scope)
        method = {"step_range": "nvtx_step_range", "profiler_step": "profiler_step"}.get(
            scope.source, "nvtx_phase_map"
        )
        info = {
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
        frame = pd.DataFrame({"phase": phase, "pid": pid, "start_ns": start, "end_ns": end})
        return info, frame, scope.kernel_instance()
    if ctx.options.step_range:
        return f"no NVTX range is named {ctx.options.step_range!r} (--step-range)"
    found = detect_all(ctx.data)
    if not found:
        return (
            f"no steps found: no phase map or --step-range, and neither a repeating launch "
            f"sequence nor at least {MIN_STEPS} launch-closing blocking syncs were found"
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


def _detected_info(found: list[Detected]) -> dict[str, Any]:
    """method, confidence, detail of automatic steps: those of the one process, or per process
    (method of the process with the most kernels, the lowest confidence of all)."""
    if len(found) == 1:
        d = found[0]
        return {"method": d.method, "confidence": d.confidence, "detail": d.detail}
    conf = min((d.confidence for d in found), key=CONFIDENCE_RANK.__getitem__)
    parts = [
        f"pid {d.pid}: {len(d.start)} steps, {d.detail}"
        + (f" (confidence {d.confidence})" if d.confidence != conf else "")
        for d in found
    ]
    detail = f"found in each of {len(found)} processes on its own; " + "; ".join(parts)
    return {"method": found[0].method, "confidence": conf, "detail": detail}


def _per_step(ctx: Context, frame: pd.DataFrame, kernel_step: np.ndarray) -> pd.DataFrame:
    k = ctx.data.kernels()
    n = len(frame)
    hit = kernel_step >= 0
    frame = frame.assign(
        step=np.arange(n),
        latency_ns=frame["end_ns"] - frame["start_ns"],
        kernels=np.bincount(kernel_step[hit], minlength=n),
    )
    pairs = launch_pairs(ctx.data)
    pstep = kernel_step[pairs.kernel]
    frame["launches"] = np.bincount(pstep[pstep >= 0], minlength=n)
    busy = np.zeros(n, dtype=np.int64)
    for pid in np.unique(frame["pid"]).tolist():
        sel = (frame["pid"] == pid).to_numpy()
        us, ue = intervals.merge(k.start[k.pid == pid], k.end[k.pid == pid])
        busy[sel] = intervals.overlap_with_union(
            frame["start_ns"].to_numpy(np.int64)[sel],
            frame["end_ns"].to_numpy(np.int64)[sel],
            us,
            ue,
        )
    frame["gpu_busy_ns"] = busy
    frame["phase_p50_ns"] = _phase_medians(frame)
    frame["outlier"] = frame["latency_ns"] > OUTLIER_FACTOR * frame["phase_p50_ns"]
    return frame


def _phase_medians(frame: pd.DataFrame) -> np.ndarray:
    """Per step: its phase's p50 latency (nearest rank, the same p50 the phase row shows)."""
    codes, uniq = pd.factorize(frame["phase"], sort=False)
    p50 = group_percentiles(frame["latency_ns"].to_numpy(np.int64), codes, len(uniq), (50,))[50]
    return p50[codes]


def _phase_row(phase: str, g: pd.DataFrame) -> dict[str, Any]:
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
    return {
        "phase": phase,
        "steps": int(len(g)),
        "p25_ns": p[25],
        "p50_ns": p[50],
        "p75_ns": p[75],
        "p90_ns": p[90],
        "p99_ns": p[99],
        "max_ns": int(lat.max()),
        "steps_per_s": round(len(g) / (span / 1e9), 3) if span > 0 else None,
        "kernels_per_step": round(float(g["kernels"].mean()), 2),
        "launches_per_step": round(float(g["launches"].mean()), 2),
        "gpu_busy_pct": round(100.0 * int(g["gpu_busy_ns"].sum()) / covered, 2) if covered else 0.0,
        "gpu_busy_ns": int(g["gpu_busy_ns"].sum()),
        "between_p50_ns": percentiles(between, (50,))[50],
        "between_total_ns": int(between.sum()),
        "outliers": int(g["outlier"].sum()),
        "multimodal": len(modes) > 1,
        "modes": modes,
    }


def _phase_table(phases: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(phases, columns=list(PHASE_COLUMNS))
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
    if len(frame) < 1:
        return METRIC.skipped("no complete step was found")
    steps = _per_step(ctx, frame.reset_index(drop=True), kernel_step)
    phases = [_phase_row(str(ph), g) for ph, g in steps.groupby("phase", sort=False)]
    outliers = steps[steps["outlier"]]
    outliers = outliers.assign(ratio=outliers["latency_ns"] / outliers["phase_p50_ns"])
    top = outliers.sort_values("ratio", ascending=False, kind="stable").head(MAX_OUTLIERS_LISTED)
    data = {
        **info,
        "outlier_factor": OUTLIER_FACTOR,
        "step_count": int(len(steps)),
        "phases": phases,
        "outliers": explain_outliers(ctx, top, kernel_step),
    }
    notes: tuple[str, ...] = ()
    if info["confidence"] == "low":
        notes = (
            "steps were detected automatically with low confidence; pass --step-range or a phase "
            "map",
        )
    tables = (
        Table("steps", STEP_COLUMNS, steps),
        Table("steps_phases", PHASE_COLUMNS, _phase_table(phases)),
    )
    return MetricResult(METRIC.id, data, tables, notes)


METRIC = Metric(
    id="steps",
    title="Steps and phases",
    run=run,
    tables={"steps": STEP_COLUMNS, "steps_phases": PHASE_COLUMNS},
    description="Serving steps per phase: latency percentiles, steps/s, kernels/step, outliers.",
)
