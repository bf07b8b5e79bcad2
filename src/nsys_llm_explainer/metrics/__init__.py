"""Metric registry, in run order (a metric may read the results of those before it)."""

from __future__ import annotations

from nsys_llm_explainer.metrics import (
    gpu_idle,
    launch_storm,
    nvtx_attribution,
    nvtx_ranges,
    per_process,
    sync,
    top_kernels,
)
from nsys_llm_explainer.metrics.base import Context, Metric

REGISTRY: tuple[Metric, ...] = (
    top_kernels.METRIC,
    launch_storm.METRIC,
    sync.METRIC,
    gpu_idle.METRIC,
    nvtx_ranges.METRIC,
    nvtx_attribution.METRIC,
    per_process.METRIC,
)

__all__ = ["REGISTRY", "Context", "Metric"]
