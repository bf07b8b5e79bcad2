"""The results that say what ran and how it repeats: workload (metrics/workload.py) and steps
(metrics/steps.py). report.json `metrics.<id>` is each one's to_json();
schema/metrics/<id>.json documents it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import ClassVar

from nsys_llm_explainer.frozen import frozen


@frozen
class KernelSignal:
    """Kernels whose names point to a framework or model kind (workload.SIGNALS)."""

    kernel_ns: int
    pct_of_kernel_time: float
    examples: list[str]


@frozen
class RangeSignal:
    """NVTX ranges whose names point to a framework or model kind."""

    ranges: int
    examples: list[str]


@frozen
class Workload:
    METRIC_ID: ClassVar[str] = "workload"

    kind: str  # llm_inference, llm_training, pytorch, tensorrt_inference, generic_cuda, unknown, ...
    confidence: str
    model: str | None  # recommendation, cnn, ... where the names show it
    evidence: tuple[str, ...]
    kernel_signals: Mapping[str, KernelSignal]  # signal id -> what matched, in signal order
    range_signals: Mapping[str, RangeSignal]

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "confidence": self.confidence,
            "model": self.model,
            "evidence": list(self.evidence),
            "kernel_signals": {k: asdict(v) for k, v in self.kernel_signals.items()},
            "range_signals": {k: asdict(v) for k, v in self.range_signals.items()},
        }


@frozen
class StepLayers:
    """The layer structure inside a step: a unit of `units` launches repeated `per_step` times."""

    units: int
    per_step: int


@frozen
class StepPhase:
    """The steps of one phase: host latency percentiles and what each step ran."""

    phase: str
    steps: int
    p25_ns: int
    p50_ns: int
    p75_ns: int
    p90_ns: int
    p99_ns: int
    max_ns: int
    steps_per_s: float | None
    gpu_p50_ns: int
    kernels_per_step: float
    launches_per_step: float
    kernel_ns_per_step: int
    total_ns: int
    gpu_busy_pct: float
    gpu_busy_ns: int
    between_p50_ns: int | None
    between_total_ns: int
    outliers: int
    multimodal: bool
    modes: list[Mapping[str, int | float]]


@frozen
class StepOutlier:
    """A step much slower than its phase's median, with the likeliest reason."""

    step: int
    phase: str
    pid: int
    start_ns: int
    latency_ns: int
    ratio_to_median: float
    gap_ns: int
    gap_cause: str | None
    kernel_name: str | None
    kernel_ns: int | None
    kernel_median_ns: int | None
    host_call: str | None
    host_call_ns: int
    reason: str | None  # idle_gap, slow_kernel, host_call


@frozen
class CarriedWork:
    """Work queued before the capture (analysis/carried.py), left out of every step."""

    kernels: int
    kernel_ns: int
    busy_ns: int
    end_ns: int | None
    devices: tuple[int, ...]


@frozen
class Steps:
    METRIC_ID: ClassVar[str] = "steps"

    method: str  # serving_iterations, nvtx_step_range, profiler_step, nvtx_phase_map, or a detector's
    confidence: str  # high, medium, low
    detail: str
    outlier_factor: float
    step_count: int
    window: str  # gpu_annotation, own_kernels
    layers: StepLayers | None
    ranges: tuple[str, ...]
    phases: tuple[StepPhase, ...]
    outliers: tuple[StepOutlier, ...]
    carried: CarriedWork

    def phase(self, name: str) -> StepPhase | None:
        return next((p for p in self.phases if p.phase == name), None)

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method,
            "confidence": self.confidence,
            "detail": self.detail,
            "outlier_factor": self.outlier_factor,
            "step_count": self.step_count,
            "window": self.window,
            "layers": None if self.layers is None else asdict(self.layers),
            "ranges": list(self.ranges),
            "phases": [asdict(p) for p in self.phases],
            "outliers": [asdict(o) for o in self.outliers],
            "carried": {**asdict(self.carried), "devices": list(self.carried.devices)},
        }
