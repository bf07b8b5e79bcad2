"""What a metric, and every helper it calls, reads: the schema probe's result, the trace's
columnar data, the options and the outcomes of the metrics it declared it reads after."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from nsys_llm_explainer.model import MetricResult, Outcome, Schema, typed_result
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.trace.data import TraceData

R = TypeVar("R")

# The skip reason of every metric that needs kernels, on a trace without any.
NO_KERNELS = "the kernel table is empty: no CUDA kernels were captured"


@dataclass
class Context:
    schema: Schema
    data: TraceData
    options: Options
    # Outcomes of the metrics this one declared in Metric.after (the runner passes no others).
    results: dict[str, Outcome] = field(default_factory=dict)

    def result(self, metric_id: str) -> MetricResult | None:
        out = self.results.get(metric_id)
        return out if isinstance(out, MetricResult) else None

    def typed(self, cls: type[R]) -> R | None:
        """The typed result (results/) of a metric this one declared it reads after."""
        return typed_result(self.results, cls)
