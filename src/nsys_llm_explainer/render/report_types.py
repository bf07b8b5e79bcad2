"""report.json as the writers read it, for the type checker.

The schema (schema/report.schema.json) is the contract; these TypedDicts describe the part of
it that report.md, report.html and the plots read. Nothing imports this module at run time
(only under `typing.TYPE_CHECKING`), so its classes cost a run no time or memory."""

from __future__ import annotations

from typing import TYPE_CHECKING, Required, TypedDict

from nsys_llm_explainer.model import JsonObject

if TYPE_CHECKING:
    from nsys_llm_explainer.ncu.results import LaunchDoc


class ToolDoc(TypedDict):
    name: str
    version: str


class BucketDoc(TypedDict):
    bucket: str
    ns: int
    pct_of_window: float


class DeviceDoc(TypedDict):
    """diagnosis.devices: where one device's time went (diagnosis/accounting.py)."""

    device_id: int
    window_start_ns: int
    window_end_ns: int
    window_ns: int
    pids: list[int]
    buckets: list[BucketDoc]


class PrimaryDoc(TypedDict):
    kind: str
    devices: list[int]
    processes: list[int]
    impact_ns: int
    impact_pct: float
    evidence: list[str]


class WorkloadDoc(TypedDict):
    kind: str
    confidence: str
    evidence: list[str]
    model: str | None


class DiagnosisDoc(TypedDict):
    verdict: str
    summary: str
    confidence: str
    primary: PrimaryDoc | None
    workload: WorkloadDoc
    capture: JsonObject
    devices: list[DeviceDoc]
    second: JsonObject | None
    kernels: JsonObject | None


class AffectedDoc(TypedDict):
    device_id: int | None
    pids: list[int]
    impact_ns: int
    impact_pct: float
    detail: str


class FindingDoc(TypedDict):
    rule_id: str
    title: str
    severity: str
    confidence: str
    evidence: list[str]
    recommendation: list[str]
    metric_ids: list[str]
    impact_ns: int | None
    impact_pct: float | None
    affected: list[AffectedDoc]
    cause: str | None
    estimated_gain_ns: int | None
    estimated_gain_step_ns: int | None
    what_if: str | None


class LeftOutDoc(TypedDict):
    rows: int  # list rows not in report.json
    csv: str  # the table holding every row


class SectionDoc(TypedDict, total=False):
    """metrics.<id>: "ok" with the metric's data, or "skipped" with the reason."""

    status: Required[str]
    reason: str
    notes: list[str]
    left_out: dict[str, LeftOutDoc]


class KernelSignalDoc(TypedDict):
    kernel_ns: int
    pct_of_kernel_time: float
    examples: list[str]


class RangeSignalDoc(TypedDict):
    ranges: int
    examples: list[str]


class WorkloadSection(SectionDoc, total=False):
    kernel_signals: dict[str, KernelSignalDoc]
    range_signals: dict[str, RangeSignalDoc]
    evidence: list[str]


class KernelRowDoc(TypedDict):
    name: str
    device_id: int
    calls: int
    total_ns: int


class TopKernelsSection(SectionDoc, total=False):
    total_kernel_ns: int
    kernel_count: int
    distinct_kernels: int
    kernels: list[KernelRowDoc]


class CategoryDoc(TypedDict):
    category: str


class CategoriesSection(SectionDoc, total=False):
    categories: list[CategoryDoc]


class ProcessDoc(TypedDict):
    pid: int
    kernel_count: int
    kernel_ns: int
    pct_of_kernel_time: float
    devices: list[int]


class PerProcessSection(SectionDoc, total=False):
    processes: list[ProcessDoc]


class StepPhaseDoc(TypedDict):
    phase: str
    steps: int
    p50_ns: int
    p99_ns: int


class StepsSection(SectionDoc, total=False):
    confidence: str
    phases: list[StepPhaseDoc]
    steps: list[JsonObject]  # per-step rows, where a report carries them (else the steps table)


class ServingPhaseDoc(TypedDict):
    phase: str
    iterations: int
    sequences_p50: int | None
    tokens: int | None
    gpu_span_p50_ns: int
    gpu_busy_p50_ns: int
    launches_per_iteration: float
    period_p50_ns: int | None
    period_p90_ns: int | None
    ns_per_token: float | None
    tokens_per_s: float | None
    graph_iterations: int


class ServingSection(SectionDoc, total=False):
    source: str
    engine: str | None
    iteration_count: int
    phases: list[ServingPhaseDoc]


class GpuDoc(TypedDict, total=False):
    device_id: int
    name: str
    bf16_tflops: float | None
    hbm_gbps: float | None


class GpuContextSection(SectionDoc, total=False):
    gpus: list[GpuDoc]


class ProgramDoc(TypedDict, total=False):
    shown: str
    kind: str
    runner: str | None
    launchers: list[str]
    one_shot: bool


class CapturedDoc(TypedDict, total=False):
    program: ProgramDoc | None


class CaptureSection(SectionDoc, total=False):
    captured: CapturedDoc


class TimelineDeviceDoc(TypedDict, total=False):
    device_id: int
    busy_pct: list[float | None]  # per bin; None outside the device's kernel window
    idle_cause: list[int] | None  # per bin, an index into causes


class BandDoc(TypedDict):
    name: str
    covered_ns: int
    runs: list[list[int]]


class TimelineSection(SectionDoc, total=False):
    bins: int
    window_start_ns: int
    window_end_ns: int
    bin_ns: float
    causes: list[str]
    devices: list[TimelineDeviceDoc]
    bands: list[BandDoc]


class IdleDeviceDoc(TypedDict):
    device_id: int
    window_start_ns: int | None
    idle_pct: float


class GapBucketDoc(TypedDict):
    label: str
    count: int
    total_ns: int


class HistogramDoc(TypedDict):
    device_id: int
    buckets: list[GapBucketDoc]


class GpuIdleSection(SectionDoc, total=False):
    devices: list[IdleDeviceDoc]
    histograms: list[HistogramDoc]


class CompositionDoc(TypedDict):
    title: str
    ns: int
    pct: float


class MedianStepDoc(TypedDict, total=False):
    step: int
    measured_ns: int
    replayed_ns: int
    composition: list[CompositionDoc]


class CriticalPathSection(SectionDoc, total=False):
    median_step: MedianStepDoc | None


class RoofDoc(TypedDict):
    dtype: str
    peak_tflops: float
    bandwidth_gbps: float


class RooflineDoc(TypedDict):
    device_id: int
    model: str | None
    peaks_basis: str
    roofs: list[RoofDoc]


class OperationDoc(TypedDict):
    label: str
    compute_dtype: str
    device_id: int
    flops: float
    bytes: float
    kernel_ns: int


class ComputeEfficiencySection(SectionDoc, total=False):
    roofline: RooflineDoc | None
    operations: list[OperationDoc]


class NcuSection(SectionDoc, total=False):
    launches: list[LaunchDoc]


class MetricsDoc(TypedDict, total=False):
    """The sections the writers read by name; templates/metrics/<id>.md.j2 read every one."""

    workload: WorkloadSection
    top_kernels: TopKernelsSection
    categories: CategoriesSection
    per_process: PerProcessSection
    steps: StepsSection
    serving: ServingSection
    gpu_context: GpuContextSection
    capture: CaptureSection
    timeline: TimelineSection
    gpu_idle: GpuIdleSection
    critical_path: CriticalPathSection
    compute_efficiency: ComputeEfficiencySection
    ncu: NcuSection


class ReportDoc(TypedDict, total=False):
    schema_version: Required[str]
    tool: Required[ToolDoc]
    trace: Required[JsonObject]
    options: Required[JsonObject]
    warnings: Required[list[str]]
    limitations: Required[list[str]]
    diagnosis: Required[DiagnosisDoc]
    findings: Required[list[FindingDoc]]
    metrics: Required[MetricsDoc]
    capture_info: JsonObject  # only with --include-capture-info
