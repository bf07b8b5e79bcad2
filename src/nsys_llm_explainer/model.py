"""The report model: plain frozen dataclasses shared by metrics, rules and writers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, TypeVar

from nsys_llm_explainer.frozen import frozen

if TYPE_CHECKING:
    import pandas as pd

# A JSON value as json.loads gives it: code that reads inside one narrows it first.
JsonValue: TypeAlias = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
JsonObject: TypeAlias = dict[str, JsonValue]


class Severity(StrEnum):
    """How much GPU time is at stake (see rules/impact.py); INFO: none, a note about the
    capture or the data."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"high": 0, "medium": 1, "low": 2, "info": 3}[self.value]


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Verdict(StrEnum):
    """The diagnosis' one-word answer (diagnosis/verdict.py decides it; docs/diagnosis.md)."""

    GPU_BOUND = "gpu_bound"
    TRANSFER_BOUND = "transfer_bound"
    HOST_BOUND = "host_bound"
    SYNC_BOUND = "sync_bound"
    COMMUNICATION_BOUND = "communication_bound"
    MIXED = "mixed"
    NOT_STEADY_STATE = "not_steady_state"
    INSUFFICIENT_DATA = "insufficient_data"
    NO_GPU_WORK = "no_gpu_work"


class Cause(StrEnum):
    """What GPU time goes to: the lead of a verdict and the cause a finding puts time at stake
    for. Each is a set of Buckets (diagnosis/accounting.py)."""

    COMPUTE = "compute"
    TRANSFER = "transfer"
    COMMUNICATION = "communication"
    SYNC = "sync"
    HOST = "host"
    STARTUP = "startup"  # a capture that is not steady state
    PROGRAM_FAILED = "program_failed"  # a run whose captured output ends in a failure (not steady state)


class Bucket(StrEnum):
    """Where a device's time went; a device's buckets sum to its window (diagnosis/accounting.py)."""

    COMPUTE = "compute"
    EXPOSED_COMMUNICATION = "exposed_communication"
    TRANSFER = "transfer"
    COMMUNICATION_WAIT = "communication_wait"
    SYNC_WAIT = "sync_wait"
    LAUNCH_BOUND = "launch_bound"
    HOST_OTHER = "host_other"
    DEVICE_WAIT = "device_wait"
    CAPTURE_EDGE = "capture_edge"


class IdleCause(StrEnum):
    """The cause of one GPU idle gap, as the idle sweep assigns it (analysis/idle_sweep.py), in
    the order of its cause columns."""

    TRANSFER = "transfer"
    COMMUNICATION = "communication"
    SYNC_WAIT = "sync_wait"
    LAUNCH_BOUND = "launch_bound"
    CAPTURE_EDGE = "capture_edge"
    HOST_OTHER = "host_other"
    DEVICE_WAIT = "device_wait"


class TraceFormat(StrEnum):
    """A trace format this tool reads, by its id in report.json (trace.format). How each is
    recognized, opened, described and captured better is trace/formats.py's registry."""

    NSYS = "nsys-sqlite"
    KINETO = "kineto-json"

    @property
    def label(self) -> str:
        """What the report calls it."""
        return _FORMAT_LABELS[self]

    @property
    def word(self) -> str:
        """Its one-word name ("nsys", "kineto"): fleet.json's traces[].format."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: Any) -> TraceFormat | None:
        """The format a report.json's trace.format names; None for none of them."""
        try:
            return cls(value)
        except (ValueError, TypeError):
            return None


_FORMAT_LABELS = {TraceFormat.NSYS: "Nsight Systems SQLite export",
                  TraceFormat.KINETO: "PyTorch profiler trace (Kineto JSON)"}


@frozen
class Schema:
    """What the schema probe found in the export. Only real tables (not views) count."""

    tables: dict[str, tuple[str, ...]]
    kernel_table: str | None
    meta_table: str | None
    nsys_version: str | None
    export_schema_version: str | None
    warnings: tuple[str, ...] = ()
    format: TraceFormat = TraceFormat.NSYS  # rules pick capture advice by it (trace/formats.py)

    def has(self, table: str | None, *columns: str) -> bool:
        if table is None or table not in self.tables:
            return False
        return all(c in self.tables[table] for c in columns)

    def columns(self, table: str) -> tuple[str, ...]:
        return self.tables.get(table, ())


@frozen
class Table:
    """A CSV table: `frame` holds the rows; columns are fixed so empty tables keep a header."""

    name: str
    columns: tuple[str, ...]
    frame: pd.DataFrame | None = None

    def rows(self) -> pd.DataFrame:
        if self.frame is None:
            # Here, not at the top: the command line reads TraceFormat to sniff a trace and
            # start its prefetch before pandas and the analysis are imported.
            import pandas as pd

            return pd.DataFrame({c: pd.Series(dtype="object") for c in self.columns})
        return self.frame.loc[:, list(self.columns)]


@frozen
class MetricResult:
    """A metric that ran. `data` is JSON-ready and becomes report.json `metrics.<id>`;
    `typed` is the metric's result object (results/<id>.py) where it has one, and `data` is
    then its to_json()."""

    metric_id: str
    data: dict[str, Any]
    tables: tuple[Table, ...] = ()
    notes: tuple[str, ...] = ()
    status: str = field(default="ok", init=False)
    typed: object | None = field(default=None, compare=False, repr=False)


R = TypeVar("R")


def typed_result(outcomes: Mapping[str, Outcome], cls: type[R]) -> R | None:
    """The typed result of the metric `cls` belongs to (cls.METRIC_ID), or None when that
    metric did not run."""
    out = outcomes.get(cls.METRIC_ID)  # type: ignore[attr-defined]
    if isinstance(out, MetricResult) and isinstance(out.typed, cls):
        return out.typed
    return None


@frozen
class Skipped:
    """A metric that could not run, and why. Every writer shows the reason."""

    metric_id: str
    reason: str
    status: str = field(default="skipped", init=False)


Outcome = MetricResult | Skipped


def round_pct(raw: float) -> float:
    """A percentage as report.json stores it: two decimals, never across a boundary of the
    one-decimal form text shows. Text formats the unrounded value (`f"{raw:.1f}%"`), the
    writers the stored one; both must read the same: 75.6488 is stored 75.64, not 75.65
    (which reads 75.7%)."""
    stored = round(raw, 2)
    shown = f"{raw:.1f}"
    if f"{stored:.1f}" == shown:
        return stored
    step = 0.01 if raw > stored else -0.01
    return round(stored + step, 2) if f"{round(stored + step, 2):.1f}" == shown else round(raw, 1)


@frozen
class Affected:
    """One device (and the processes that use it) a finding applies to, with its own numbers."""

    device_id: int | None
    pids: tuple[int, ...]
    impact_ns: int
    impact_pct: float  # of this device's window
    detail: str = ""


@frozen
class Finding:
    rule_id: str
    title: str
    severity: Severity
    confidence: Confidence
    evidence: tuple[str, ...]
    recommendation: tuple[str, ...]
    metric_ids: tuple[str, ...] = ()
    # GPU time at stake (a ceiling): what the affected devices would get back if the cause
    # disappeared; None for notes about the capture or the data (severity INFO).
    impact_ns: int | None = None
    impact_pct: float | None = None  # of the affected devices' windows
    affected: tuple[Affected, ...] = ()
    cause: Cause | None = None  # the diagnosis cause it explains
    # What the change the finding proposes buys, by replaying the step graph (rules/impact.py):
    # over the captured window and per step (median); None when not estimated.
    estimated_gain_ns: int | None = None
    estimated_gain_step_ns: int | None = None
    what_if: str | None = None  # the what_if metric's change behind the estimate


# A finding's evidence line that says why its estimated gain is not given, or far below its
# time at stake, starts with one of these (rules/impact.py writes it; the report writes it on the
# time at stake's line).
GAIN_NOT_GIVEN = "estimated gain not given: "
GAIN_FAR_BELOW = "estimated gain far below the time at stake: "
GAIN_WHY_PREFIXES = (GAIN_NOT_GIVEN, GAIN_FAR_BELOW)


@frozen
class Primary:
    """The bottleneck behind the verdict."""

    kind: str  # a Cause; with no GPU work or a failed run, the run's outcome (diagnosis/capture.py)
    devices: tuple[int, ...]
    processes: tuple[int, ...]
    impact_ns: int
    impact_pct: float
    evidence: tuple[str, ...]


@frozen
class Workload:
    kind: str
    confidence: Confidence
    evidence: tuple[str, ...]
    model: str | None = None  # recommendation, cnn (metrics/workload.py), when shown and not an LLM


@frozen
class CaptureCheck:
    id: str
    found: bool
    summary: str
    time_ns: int = 0
    pct_of_window: float = 0.0


@frozen
class CaptureReview:
    steady_state: bool
    checks: tuple[CaptureCheck, ...]
    facts: tuple[str, ...]  # what the trace says about itself (exporter, GPUs, graph mode ...)
    recipe: tuple[str, ...]  # how to capture steady state, when it was not
    # what changes the figures' meaning, shown before the verdict: a slice, work carried in,
    # missing events, profiler overhead, an interrupted run (diagnosis/capture.py)
    captured: tuple[str, ...] = ()


@frozen
class Diagnosis:
    verdict: Verdict
    summary: str
    confidence: Confidence
    primary: Primary | None
    workload: Workload
    capture: CaptureReview
    # JSON sections of report.json diagnosis, written as the diagnosis builds them:
    devices: tuple[JsonObject, ...] = ()  # per-device time buckets (diagnosis/accounting.py)
    second: JsonObject | None = None  # the cause named second: kind, impact_ns, impact_pct
    kernels: JsonObject | None = None  # what GPU-bound kernels are limited by (diagnosis/kernel_mix.py)


@frozen
class GpuInfo:
    device_id: int
    name: str | None
    sm_count: int | None = None
    total_memory_bytes: int | None = None
    memory_bandwidth_bytes_per_s: int | None = None
    clock_hz: int | None = None
    compute_capability: str | None = None  # "8.0" (NVIDIA); AMD reports its gfx major.minor ("9.4")
    vendor: str | None = None  # "nvidia" or "amd" where the trace tells


@frozen
class ProcessInfo:
    pid: int
    kernel_count: int
    name: str | None = None  # only with --include-capture-info


class Distributed(TypedDict):
    """report.json trace.distributed: where the trace sits in a distributed job (each None
    when the trace does not record it)."""

    rank: int | None
    world_size: int | None
    backend: str | None  # the collective backend: nccl, mpi, gloo ...


class ProcessName(TypedDict):
    pid: int
    name: str | None


class Setting(TypedDict):
    name: str
    value: str


class EnvironmentVariable(TypedDict):
    process: str
    name: str
    value: str  # redacted where the name looks secret


class CaptureInfo(TypedDict):
    """report.json capture_info (--include-capture-info): process names, the capture's
    settings and environment, secrets redacted, and how many values were."""

    processes: list[ProcessName]
    settings: list[Setting]
    environment: list[EnvironmentVariable]
    redacted_values: int


@frozen
class TraceInfo:
    path: str
    size_bytes: int
    nsys_version: str | None
    export_schema_version: str | None
    gpus: tuple[GpuInfo, ...]
    processes: tuple[ProcessInfo, ...]
    window_start_ns: int | None
    window_end_ns: int | None
    tables: dict[str, int]  # core tables found -> row count
    format: TraceFormat = TraceFormat.NSYS  # which source read the file
    # The format's own version fields (a PyTorch profiler trace's schemaVersion ...); report.json
    # calls them trace.kineto (render/json_writer.py).
    format_details: dict[str, int | str] | None = None
    distributed: Distributed | None = None  # rank, world_size, backend when recorded


@frozen
class Report:
    """A report's data: the trace, each metric's outcome, the findings (most severe first)
    and the diagnosis. It knows nothing of output: api.Report, what explain() returns, adds
    to_dict(), table() and write() (the writers are in render/)."""

    trace: TraceInfo
    metrics: dict[str, Outcome]
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...]
    limitations: tuple[str, ...]
    options: JsonObject  # Options.to_json(): report.json options
    capture_info: CaptureInfo | None = None
    diagnosis: Diagnosis | None = None

    def ok(self, metric_id: str) -> MetricResult | None:
        outcome = self.metrics.get(metric_id)
        return outcome if isinstance(outcome, MetricResult) else None
