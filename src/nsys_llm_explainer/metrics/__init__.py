"""Metric registry, in report order (a metric may read the results of those before it).

A metric is a module of this package that defines METRIC (metrics/base.py); ORDER names it
once, where it runs; RUN_AFTER moves a few earlier, to free memory sooner."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.metrics.base import Metric

ORDER: tuple[str, ...] = (
    "top_kernels",
    "launch_storm",
    "sync",
    "gpu_idle",
    "nvtx_ranges",
    "nvtx_attribution",
    "per_process",
    "launch_overhead",
    "boundness",
    "workload",  # before capture: TensorRT engines skip the autotuning check
    "steps",  # before capture: enough data is judged by repeated steps
    "capture",
    "idle_causes",
    "step_work",  # after steps: the work inside its complete steps
    "critical_path",  # right after steps: it reads its steps and the caches steps holds
    "what_if",
    "casts",
    "host_patterns",
    "categories",
    "memory_transfers",
    "gpu_context",
    "communication",
    "cuda_graphs",
    "fusion_candidates",
    "operators",  # PyTorch profiler traces only (Skipped elsewhere)
    "compute_efficiency",  # after operators, nvtx_attribution, steps (shares their caches), workload
    "model_utilization",  # after steps, workload and compute_efficiency
    "serving",  # after steps, workload and model_utilization
    "gemm_precision",
    "ncu_targets",  # after top_kernels, capture and compute_efficiency
    "ncu_results",  # only with --ncu
    "timeline",  # keep last: it summarizes the metrics above for plots
)

REGISTRY: tuple[Metric, ...] = tuple(importlib.import_module(f"{__name__}.{name}").METRIC for name in ORDER)

# Metrics that run right after another instead of in report order: each as soon as what it
# reads is built, so that the large intermediates they share are released earlier
# (runtime/lifetimes.py). Communication is the last reader of the device work but idle_causes
# and steps; timeline and host_patterns are the last readers of the idle split besides them.
# The report lists the metrics in REGISTRY order whatever order they ran in.
RUN_AFTER: dict[str, str] = {
    "communication": "capture",
    "timeline": "idle_causes",
    "host_patterns": "steps",
    "fusion_candidates": "ncu_plan",
}


def in_run_order(metrics: Sequence[Metric]) -> list[Metric]:
    """`metrics` (in REGISTRY order) in the order they run (RUN_AFTER)."""
    wanted = {m.id for m in metrics}
    followers: dict[str, list[Metric]] = {}
    for m in metrics:
        if RUN_AFTER.get(m.id) in wanted:
            followers.setdefault(RUN_AFTER[m.id], []).append(m)
    out: list[Metric] = []

    def emit(m: Metric) -> None:
        out.append(m)
        for f in followers.get(m.id, ()):
            emit(f)

    for m in metrics:
        if RUN_AFTER.get(m.id) not in wanted:
            emit(m)
    return out


# The metrics of every report: REGISTRY less those that run only when an option asks for them
# (Metric.option: ncu with --ncu).
ALWAYS: tuple[Metric, ...] = tuple(m for m in REGISTRY if m.option is None)

__all__ = ["ALWAYS", "ORDER", "REGISTRY", "RUN_AFTER", "Context", "Metric", "in_run_order"]
