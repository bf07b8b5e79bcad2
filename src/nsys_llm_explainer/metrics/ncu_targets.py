"""ncu_plan: an Nsight Compute plan for the kernels worth a closer look (compute/ncu_plan.py).

The top kernels by GPU time (per name and device, top_kernels' order), each with its
category (categories), its bound where compute_efficiency placed it, and the ordinal of
each of its launches among all the capture's launches (kernel start order). The warm-up to
skip ends at capture's steady_start_ns when the capture metric found start-up work, else at
the first 10% of the launches. Mangled names come from the export when it has them. The
report writer turns the plan into ncu_plan.sh and ncu_targets.json beside report.json.

ncu counts launches from the start of the process, the plan from the start of the capture
(compute/ncu_plan.py says how each command deals with it). What the trace adds: with
PyTorch profiler steps (ProfilerStep#N), the steps numbered before the first captured one
ran before the capture; with steps from NVTX ranges (--step-range on an Nsight Systems
export), an NVTX filter on those ranges, with each kernel's launches whose launch call lies
inside one of them (same process).

Skipped for traces of other GPUs than NVIDIA's (an AMD GPU by name, a ROCm build's version
fields, HIP calls): ncu profiles NVIDIA GPUs only.
"""

from __future__ import annotations

import re

import numpy as np

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.join import kernel_categories, kernel_launch_index
from nsys_llm_explainer.compute import ncu_plan
from nsys_llm_explainer.compute.ncu_plan import nvtx_include
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, TraceFormat
from nsys_llm_explainer.results.efficiency import ComputeEfficiency
from nsys_llm_explainer.results.kernels import KernelRow, NcuPlan, TopKernels
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import Unavailable

TARGETS = 10  # kernels in the plan (NCCL kernels are listed as left out, not counted)
FILES = ("ncu_plan.sh", "ncu_targets.json")
WARMUP_PCT = 10  # compute/ncu_plan.WARMUP_SHARE, as the report states it
PUSH_POP = 59  # NVTX_EVENTS eventType of push/pop ranges (60: start/end)
OTHER_VENDOR = re.compile(r"\b(AMD|Instinct|Radeon)\b|\bMI\d{3}", re.IGNORECASE)
ROCM_KEYS = ("hip_", "rocm_", "roctracer_")  # PyTorch profiler traces from ROCm builds


def _bounds(ctx: Context) -> dict[tuple[str, int], str]:
    ce = ctx.typed(ComputeEfficiency)
    if ce is None:
        return {}
    return {(r.name, int(r.device_id)): r.bound for r in ce.kernels if r.bound}


def _categories(ctx: Context) -> dict[int, str]:
    """name_id -> category."""
    try:
        kc = kernel_categories(ctx.data, load_table(ctx.options.kernel_categories))
    except UsageError:
        return {}
    return {int(i): kc.categories[int(c)] for i, c in zip(kc.name_ids, kc.name_category, strict=True)}


def _steps_before(ctx: Context) -> tuple[int, int]:
    """(profiler steps numbered before the first captured one, captured steps)."""
    try:
        marks = ctx.data.step_ranges()
    except Unavailable:
        return 0, 0
    numbers = np.unique(marks.step[marks.step >= 0]) if len(marks) else np.empty(0, np.int64)
    return (int(numbers[0]), len(numbers)) if len(numbers) else (0, 0)


def _step_ranges(ctx: Context) -> tuple[str | None, np.ndarray | None]:
    """The --nvtx-include expression of the steps' NVTX ranges, and per kernel row whether
    its launch call lies inside one of them (same process); (None, None) without them."""
    steps = ctx.result("steps")
    name = ctx.options.step_range
    nsys = ctx.data.format is TraceFormat.NSYS  # Kineto's ranges are not NVTX when ncu runs
    if not nsys or steps is None or steps.data.get("method") != "nvtx_step_range" or not name:
        return None, None
    try:
        nv = ctx.data.nvtx()
        runtime = ctx.data.runtime()
    except Unavailable:
        return None, None
    ids = [i for i, n in enumerate(ctx.data.nvtx_names()) if n == name]
    sel = np.isin(nv.name, ids) & (nv.end >= 0)
    if not sel.any():
        return None, None
    expr = nvtx_include(name, bool((nv.event_type[sel] == PUSH_POP).all()))
    if expr is None:
        return None, None
    k = ctx.data.kernels()
    launch = kernel_launch_index(ctx.data)
    at = np.where(launch >= 0, runtime.start[np.maximum(launch, 0)], -1)
    inside = np.zeros(len(k), dtype=bool)
    for pid in np.unique(nv.pid[sel]).tolist():
        mine = sel & (nv.pid == pid)
        start, end = np.sort(nv.start[mine]), np.sort(nv.end[mine])
        rows = np.flatnonzero((k.pid == pid) & (at >= 0))
        # inside some range: more ranges started than ended at the launch time
        opened = np.searchsorted(start, at[rows], "right") - np.searchsorted(end, at[rows], "left")
        inside[rows[opened > 0]] = True
    return expr, inside


def not_nvidia(ctx: Context) -> str | None:
    """Why the trace's GPUs are not NVIDIA GPUs (Nsight Compute profiles only those), or None:
    a GPU named AMD, Instinct or Radeon, a HIP or ROCm version in the trace, HIP calls."""
    names = sorted({g.name for g in ctx.data.gpus() if g.name and OTHER_VENDOR.search(g.name)})
    if names:
        return f"the trace's GPU is {', '.join(names)}"
    versions = sorted(k for k in (ctx.data.format_details() or {}) if k.startswith(ROCM_KEYS))
    if versions:
        return f"the trace records {versions[0]}"
    try:
        hip = any(n.startswith("hip") for n in ctx.data.runtime_api_names())
    except Unavailable:
        hip = False
    return "the trace's runtime calls are HIP calls" if hip else None


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    vendor = not_nvidia(ctx)
    if vendor is not None:
        return METRIC.skipped(f"{vendor}: Nsight Compute profiles NVIDIA GPUs only")
    top = ctx.typed(TopKernels)
    if top is None:
        return METRIC.skipped("top_kernels did not run")
    order = np.argsort(k.start, kind="stable")
    ordinal = np.empty(len(order), dtype=np.int64)
    ordinal[order] = np.arange(len(order))
    capture = ctx.result("capture")
    steady_ns = capture.data.get("steady_start_ns") if capture else None
    steady_from = int(np.searchsorted(k.start[order], steady_ns)) if steady_ns is not None else None
    codes, uniq = factorize(k.name_id)
    names = ctx.data.kernel_names(np.asarray(uniq, dtype=np.int64))
    code_of = {names.get(int(i), ""): j for j, i in enumerate(uniq.tolist())}
    total = int(k.dur.sum())
    categories, bounds = _categories(ctx), _bounds(ctx)
    chosen: list[tuple[KernelRow, int]] = []
    for row in top.kernels:
        j = code_of.get(row.name)
        if j is None:
            continue
        chosen.append((row, int(uniq[j])))
        if sum(1 for r, _ in chosen if not r.name.startswith("nccl")) >= TARGETS:
            break
    mangled = ctx.data.kernel_mangled_names(np.array([i for _, i in chosen], dtype=np.int64))
    expr, inside = _step_ranges(ctx)
    before, captured = _steps_before(ctx)
    targets = []
    for row, name_id in chosen:
        dev = int(row.device_id)
        sel = (k.name_id == name_id) & (k.device == dev)
        targets.append(ncu_plan.KernelTarget(
            name=row.name, device=dev, calls=int(row.calls), total_ns=int(row.total_ns),
            call_order=ordinal[sel].tolist(), category=categories.get(name_id, "other"),
            bound=bounds.get((row.name, dev)),
            mangled_name=row.name if ctx.data.kernel_name_mode == "mangled" else mangled.get(name_id),
            share_pct=100.0 * int(row.total_ns) / total if total else None,
            in_ranges=ordinal[sel & inside].tolist() if inside is not None else None,
        ))
    counting = ncu_plan.Counting(expr, before, captured)
    plan = ncu_plan.plan(targets, steady_from, len(order), counting)
    result = NcuPlan(
        steady_from_launch=steady_from,
        warmup="launches before the capture's steady start (capture.steady_start_ns)"
        if steady_from is not None else f"the first {WARMUP_PCT}% of the capture's launches",
        launches=int(len(order)),
        counting=(
            "launch skips count from the capture's first launch; ncu counts from the start of the "
            "process, so launches before the capture must be added"
            + (f" ({before} profiler steps ran before the first captured one)" if before else "")
            + (f"; an NVTX filter on the step ranges ({expr}) is offered per kernel" if expr else "")
        ),
        files=FILES,
        plan=plan,
    )
    return MetricResult(METRIC.id, result.to_json(), typed=result)


METRIC = Metric(
    id="ncu_plan",
    # after top_kernels, capture and compute_efficiency
    order=300,
    title="Nsight Compute plan",
    run=run,
    description=(
        "The top kernels by GPU time with a ready ncu command each (ncu_plan.sh, "
        "ncu_targets.json): escaped name regex, launch skip past the warm-up, sections for the question."
    ),
    after=("top_kernels", "capture", "compute_efficiency", "steps"),
    reads=("runtime", "kernel_launch_index", "kernel_categories:"),
)
