"""Metric registry, in run order (a metric may read the results of those before it)."""

from __future__ import annotations

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.metrics import (
    boundness,
    capture,
    casts,
    critical_path,
    categories,
    communication,
    compute_efficiency,
    cuda_graphs,
    fusion_candidates,
    gemm_precision,
    gpu_context,
    gpu_idle,
    host_patterns,
    idle_causes,
    launch_overhead,
    launch_storm,
    memory_transfers,
    model_utilization,
    ncu_results,
    ncu_targets,
    nvtx_attribution,
    nvtx_ranges,
    operators,
    per_process,
    step_work,
    steps,
    sync,
    timeline,
    top_kernels,
    what_if,
    workload,
)
from nsys_llm_explainer.metrics.base import Metric

REGISTRY: tuple[Metric, ...] = (
    top_kernels.METRIC,
    launch_storm.METRIC,
    sync.METRIC,
    gpu_idle.METRIC,
    nvtx_ranges.METRIC,
    nvtx_attribution.METRIC,
    per_process.METRIC,
    launch_overhead.METRIC,
    boundness.METRIC,
    workload.METRIC,  # before capture: TensorRT engines skip the autotuning check
    capture.METRIC,
    idle_causes.METRIC,
    steps.METRIC,
    step_work.METRIC,  # after steps: the work inside its complete steps
    critical_path.METRIC,  # right after steps: it reads its steps and the caches steps holds
    what_if.METRIC,
    casts.METRIC,
    host_patterns.METRIC,
    categories.METRIC,
    memory_transfers.METRIC,
    gpu_context.METRIC,
    communication.METRIC,
    cuda_graphs.METRIC,
    fusion_candidates.METRIC,
    operators.METRIC,  # PyTorch profiler traces only (Skipped elsewhere)
    compute_efficiency.METRIC,  # after operators, nvtx_attribution, steps (shares their caches), workload
    model_utilization.METRIC,  # after steps, workload and compute_efficiency
    gemm_precision.METRIC,
    ncu_targets.METRIC,  # after top_kernels, capture and compute_efficiency
    ncu_results.METRIC,  # only with --ncu
    timeline.METRIC,  # keep last: it summarizes the metrics above for plots
)

# The metrics of every report: REGISTRY less those that run only when an option asks for them
# (Metric.option: ncu with --ncu).
ALWAYS: tuple[Metric, ...] = tuple(m for m in REGISTRY if m.option is None)

__all__ = ["ALWAYS", "REGISTRY", "Context", "Metric"]
