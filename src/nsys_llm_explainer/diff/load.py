"""The two sides of a diff, and the basis they are compared on.

A side is a trace (analyzed now: an Nsight Systems export or a PyTorch profiler
trace) or a report.json written earlier.

Both become the same report.json dict, so every delta is computed from report.json data
only and a stored baseline behaves exactly like its trace.

The basis (choose): per step, per call, and whole-capture totals as measured.

Nothing is divided by the captured window. A capture's window holds whatever ran around the
work (a one-shot test is mostly idle, a window cut from a loop starts and ends mid-step), so
"per second of captured window" moves with the window, not with the program: on a one-shot
capture whose GEMMs got faster, the window shrinks and every unchanged count reads as a rise.
The rule:

- `per_step`: both reports have the work inside complete steps (metrics.step_work): every
  per-step figure, kernel and category comes from it (in_step.py);
- `per_call`: otherwise each kernel is compared per call (its median duration), and counts as
  counts;
- whole-capture totals (totals.py) are always shown as measured, each side's window beside
  them, and are never divided by a step count either (a capture's totals hold the partial
  steps its edges cut and the work between steps).

diff.md says which basis was used."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal, TypedDict, cast, overload

from nsys_llm_explainer import fmt
from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render.json_writer import SCHEMA_VERSION, report_dict

REPORT_NAME = "report.json"
SUPPORTED_MAJOR = SCHEMA_VERSION.split(".")[0]
SQLITE_MAGIC = b"SQLite format 3\x00"
TRACE_EVENTS_KEY = b'"traceEvents"'
TRACE_SNIFF_BYTES = 1 << 20
DIFF_INPUTS = (f"an Nsight Systems export (.sqlite), a PyTorch profiler trace (.json or .json.gz) or a "
               f"{REPORT_NAME} written by {TOOL_NAME}")


# The parts of report.json the diff reads (report.schema.json and schema/metrics/ have the whole
# contract). A report is read from disk, so every key may be absent: readers use .get() or let
# the section's guard (compare._guarded) turn a missing key into not_compared.


class ToolDoc(TypedDict, total=False):
    name: str
    version: str


class GpuDoc(TypedDict, total=False):
    device_id: int
    name: str | None


class DistributedDoc(TypedDict, total=False):
    rank: int | None
    world_size: int | None
    backend: str | None


class TraceDoc(TypedDict, total=False):
    format: str
    nsys_version: str | None
    export_schema_version: str | None
    kineto: JsonObject | None
    window_start_ns: int | None
    window_end_ns: int | None
    gpus: list[GpuDoc]
    distributed: DistributedDoc | None


class FindingDoc(TypedDict, total=False):
    rule_id: str
    severity: str
    title: str
    impact_pct: float | None
    metric_ids: list[str] | None


class DiagnosisDoc(TypedDict, total=False):
    verdict: str
    summary: str | None


class MetricDoc(TypedDict, total=False):
    """What every metric section has: whether it ran, and why not."""

    status: str
    reason: str


class TopKernelDoc(TypedDict, total=False):
    name: str
    calls: int
    total_ns: int
    p50_ns: float | None


class TopKernelsDoc(MetricDoc, total=False):
    total_kernel_ns: int
    kernel_count: int
    devices: list[int]
    kernels: list[TopKernelDoc]
    name_mode: str | None


class LaunchOverheadDoc(MetricDoc, total=False):
    launch_calls: int


class IdleDeviceDoc(TypedDict, total=False):
    device_id: int
    window_start_ns: int
    window_end_ns: int
    busy_ns: int
    idle_ns: int
    idle_pct: float


class GpuIdleDoc(MetricDoc, total=False):
    devices: list[IdleDeviceDoc]


class SyncDoc(MetricDoc, total=False):
    blocking_ns: int


class NvtxAttributionDoc(MetricDoc, total=False):
    coverage: float


class CompositionDoc(TypedDict, total=False):
    kind: str
    title: str
    ns: float
    pct: float


class MedianStepDoc(TypedDict, total=False):
    step: int | None
    measured_ns: int | None
    bound: str | None
    composition: list[CompositionDoc]


class PathCategoryDoc(TypedDict):
    category: str
    ns_per_step: float


class ReplayErrorDoc(TypedDict):
    median: float | None
    max: float | None


class CriticalPathDoc(MetricDoc, total=False):
    median_step: MedianStepDoc | None
    kernel_categories: list[PathCategoryDoc] | None
    replay_error_pct: ReplayErrorDoc


class PerStepDoc(TypedDict, total=False):
    """metrics.step_work.per_step: one value per complete step in each series."""

    phase: list[int]
    pid: list[int]
    latency_ns: list[float]
    kernel_ns: list[float]
    kernels: list[float]
    busy_ns: list[float]
    host_ns: list[float] | None


class StepWorkNameDoc(TypedDict, total=False):
    name: str
    category: str | None
    calls: int
    ns: int
    series_ns: list[float]
    series_calls: int | list[float]  # one count for every step, or one per step


class StepWorkCategoryDoc(TypedDict):
    category: str
    series_ns: list[float]


class StepWorkDoc(MetricDoc, total=False):
    steps: int
    steps_method: str | None
    series_steps: int
    phases: list[str]
    per_step: PerStepDoc
    names: list[StepWorkNameDoc]
    categories: list[StepWorkCategoryDoc]
    kernels: int
    kernel_ns: int
    outside_ns: int
    outside_kernels: int


class CarriedDoc(TypedDict, total=False):
    kernels: int
    kernel_ns: int
    busy_ns: int


class StepsPhaseDoc(TypedDict, total=False):
    """A phase of metrics.steps, under the key spellings of nearby versions (in_step.py)."""

    phase: str | None
    name: str | None
    steps: int
    step_count: int
    count: int
    n_steps: int
    kernels_per_step: float
    p50_ns: float
    latency_p50_ns: float
    step_p50_ns: float
    p90_ns: float
    latency_p90_ns: float
    step_p90_ns: float
    p25_ns: float
    latency_p25_ns: float
    p75_ns: float
    latency_p75_ns: float


class StepDurationDoc(TypedDict, total=False):
    """A step of metrics.steps (its duration under the key spellings of nearby versions)."""

    phase: str | None
    duration_ns: float
    dur_ns: float
    latency_ns: float


class StepsDoc(MetricDoc, total=False):
    method: str | None
    phases: list[StepsPhaseDoc] | dict[str, StepsPhaseDoc]
    steps: list[StepDurationDoc]
    carried: CarriedDoc | None


class EfficiencyDeviceDoc(TypedDict, total=False):
    device_id: int
    peak_tflops: dict[str, float | None] | None
    hbm_gbps: float | None


class EfficiencyKernelDoc(TypedDict, total=False):
    name: str
    device_id: int
    calls: int
    kernel_ns: int
    flops: float | None
    bytes: float | None
    tflops: float | None
    gbps: float | None
    bound: str | None
    math_dtype: str | None
    compute_dtype: str | None
    implausible: bool


class ComputeEfficiencyDoc(MetricDoc, total=False):
    devices: list[EfficiencyDeviceDoc] | None
    kernels: list[EfficiencyKernelDoc] | None


class OperatorKernelDoc(TypedDict, total=False):
    operator: str | None
    kernel: str
    kernel_ns: int | None


class OperatorsDoc(MetricDoc, total=False):
    operator_kernels: list[OperatorKernelDoc] | None


class MetricsDoc(TypedDict, total=False):
    """report.json `metrics`, the sections the diff reads (metrics.categories is read under a
    few key spellings, totals.py, so it stays a plain JSON object)."""

    top_kernels: TopKernelsDoc
    launch_overhead: LaunchOverheadDoc
    gpu_idle: GpuIdleDoc
    sync: SyncDoc
    nvtx_attribution: NvtxAttributionDoc
    categories: JsonObject
    critical_path: CriticalPathDoc
    step_work: StepWorkDoc
    steps: StepsDoc
    compute_efficiency: ComputeEfficiencyDoc
    operators: OperatorsDoc


class ReportDoc(TypedDict, total=False):
    schema_version: str
    tool: ToolDoc
    trace: TraceDoc
    metrics: MetricsDoc
    findings: list[FindingDoc]
    diagnosis: DiagnosisDoc | None


MetricId = Literal["top_kernels", "launch_overhead", "gpu_idle", "sync", "nvtx_attribution", "categories",
                   "critical_path", "step_work", "steps", "compute_efficiency", "operators"]


@frozen
class Side:
    label: str  # the path the user gave
    kind: str  # "trace" or "report"
    doc: ReportDoc  # report.json content
    role: str = "BASE"  # "BASE" or "NEW": how reasons name this side

    @overload
    def metric(self, metric_id: Literal["top_kernels"]) -> TopKernelsDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["launch_overhead"]) -> LaunchOverheadDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["gpu_idle"]) -> GpuIdleDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["sync"]) -> SyncDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["nvtx_attribution"]) -> NvtxAttributionDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["categories"]) -> JsonObject | None: ...
    @overload
    def metric(self, metric_id: Literal["critical_path"]) -> CriticalPathDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["step_work"]) -> StepWorkDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["steps"]) -> StepsDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["compute_efficiency"]) -> ComputeEfficiencyDoc | None: ...
    @overload
    def metric(self, metric_id: Literal["operators"]) -> OperatorsDoc | None: ...
    @overload
    def metric(self, metric_id: str) -> MetricDoc | JsonObject | None: ...

    def metric(self, metric_id: str) -> MetricDoc | JsonObject | None:
        """The metric's report.json data when it ran, else None."""
        m = self.doc.get("metrics", {}).get(metric_id)
        return m if isinstance(m, dict) and m.get("status") == "ok" else None

    def why_missing(self, metric_id: str) -> str:
        m = self.doc.get("metrics", {}).get(metric_id)
        if isinstance(m, dict) and m.get("status") == "skipped":
            reason = m.get("reason", "no reason given")
            return f"{metric_id} was not measured on {self.role} ({reason})"
        return f"the {self.role} report has no {metric_id} metric"


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as fh:
            return fh.read(64)
    except OSError:
        return b""  # explain() reports unreadable files with the right message


def _is_profiler_trace(path: Path) -> bool:
    """A plain-JSON PyTorch profiler trace (its traceEvents key comes early; reports have none)."""
    try:
        with path.open("rb") as fh:
            return TRACE_EVENTS_KEY in fh.read(TRACE_SNIFF_BYTES)
    except OSError:
        return False


def load_side(path: Path, options: Options, role: str = "BASE") -> Side:
    """A report.json (or a directory holding one) is read; anything else is analyzed."""
    if path.is_dir() and (path / REPORT_NAME).is_file():
        return load_report(path / REPORT_NAME, role, label=str(path))
    head = _head(path)
    if (path.suffix.lower() == ".json" or (
        head.lstrip()[:1] == b"{" and not head.startswith(SQLITE_MAGIC)
    )) and not _is_profiler_trace(path):
        return load_report(path, role)
    # report_dict builds the report.json document this type describes (the schema checks it)
    return Side(str(path), "trace", cast(ReportDoc, report_dict(explain(path, options))), role)


def load_report(path: Path, role: str = "BASE", label: str | None = None) -> Side:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(
            f"{path}: is not valid JSON ({exc}); pass {DIFF_INPUTS}"
        ) from None
    tool = doc.get("tool") if isinstance(doc, dict) else None
    if not isinstance(tool, dict) or tool.get("name") != TOOL_NAME:
        raise InputError(
            f"{path}: is JSON but not a {REPORT_NAME} written by {TOOL_NAME} "
            f"(its tool.name differs) nor a PyTorch profiler trace; pass {DIFF_INPUTS}"
        )
    version = str(doc.get("schema_version", ""))
    if version.split(".")[0] != SUPPORTED_MAJOR:
        raise InputError(
            f"{path}: report schema_version {version or '(missing)'} is not supported "
            f"(this {TOOL_NAME} reads {SUPPORTED_MAJOR}.x); write the report again with this "
            "version"
        )
    if not isinstance(doc.get("metrics"), dict) or not isinstance(doc.get("trace"), dict):
        raise InputError(
            f"{path}: {REPORT_NAME} lacks its metrics or trace section; write it again"
        )
    return Side(label or str(path), "report", doc, role)


class BasisDoc(TypedDict):
    """diff.json `basis`."""

    kind: str
    base_window_ns: int | None
    new_window_ns: int | None
    reason: str


@frozen
class Basis:
    kind: str  # "per_step" or "per_call"
    base_window_ns: int | None
    new_window_ns: int | None
    reason: str

    def to_json(self) -> BasisDoc:
        return {"kind": self.kind, "base_window_ns": self.base_window_ns,
                "new_window_ns": self.new_window_ns, "reason": self.reason}


def window_ns(side: Side) -> int | None:
    t = side.doc.get("trace", {})
    start, end = t.get("window_start_ns"), t.get("window_end_ns")
    if isinstance(start, int) and isinstance(end, int) and end > start:
        return end - start
    return None


def choose(base: Side, new: Side, steps: bool) -> Basis:
    """`steps`: both reports have the work inside their complete steps."""
    wb, wn = window_ns(base), window_ns(new)
    windows = f"captured windows {fmt.dur(wb) if wb else 'unknown'} vs {fmt.dur(wn) if wn else 'unknown'}"
    if steps:
        return Basis("per_step", wb, wn, f"both captures have complete steps: kernels and categories are "
                     f"compared per step; whole-capture totals as measured ({windows})")
    return Basis("per_call", wb, wn, f"a capture has no complete steps: kernels are compared per call and "
                 f"counts as counts; whole-capture totals as measured ({windows})")


def rel_pct(base: float, new: float) -> float:
    """Relative change in percent; +inf when something appears from zero."""
    if base == new:
        return 0.0
    if base == 0:
        return math.inf if new > 0 else -math.inf
    return 100.0 * (new - base) / abs(base)


def json_pct(value: float | None) -> float | None:
    """diff.json stores an infinite change as null (the row's base value is 0)."""
    if value is None or math.isinf(value):
        return None
    return round(value, 4)
