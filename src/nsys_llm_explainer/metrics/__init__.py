"""Metric registry, in run order (a metric may read the results of those before it).

A metric is a module of this package that defines METRIC (metrics/base.py); ORDER names it
once, where it runs."""

from __future__ import annotations

import importlib

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
    "gemm_precision",
    "ncu_targets",  # after top_kernels, capture and compute_efficiency
    "ncu_results",  # only with --ncu
    "timeline",  # keep last: it summarizes the metrics above for plots
)

REGISTRY: tuple[Metric, ...] = tuple(importlib.import_module(f"{__name__}.{name}").METRIC for name in ORDER)

# The metrics of every report: REGISTRY less those that run only when an option asks for them
# (Metric.option: ncu with --ncu).
ALWAYS: tuple[Metric, ...] = tuple(m for m in REGISTRY if m.option is None)

__all__ = ["ALWAYS", "ORDER", "REGISTRY", "Context", "Metric"]
