"""The results that say what ran, how it repeats and how far the capture shows it: workload
(metrics/workload.py), steps (metrics/steps.py), capture (metrics/capture.py), critical_path
(metrics/critical_path.py) and what_if (metrics/what_if.py). report.json `metrics.<id>` is
each one's to_json(); schema/metrics/<id>.json documents it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import ClassVar

from nsys_llm_explainer.analysis.program import Ending, Program
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.results.launches import ApiCalls


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


@frozen
class PathShare:
    """One kind of time on the followed steps' critical paths (graph/path.py KINDS)."""

    kind: str  # host, launch, kernel, communication, copy, memset, sync, gpu_gap, unexplained, carried
    title: str
    ns_per_step: int
    pct: float


@frozen
class PathTrust:
    """How much of the followed paths the replay keeps as measured, and the step and stream it
    trusts most (graph/analyze.py trust)."""

    kept_pct: float
    trusted: bool
    step: int | None
    pid: int | None
    stream: str | None
    step_kept_pct: float | None


@frozen
class PathGraph:
    """The step graph's size, and the counts of what it could not recover."""

    host_calls: int
    tasks: int
    host_waits: int
    cross_stream_edges: int
    replay_rounds: int
    counts: Mapping[str, int]


@frozen
class PathItem:
    """An item on the critical path (critical_path_items rows): a kernel, a copy direction, a CUDA
    API, a host range or operator, or a fixed label for gaps and waits."""

    kind: str
    item: str
    category: str  # the kernel category for kernel items, else ""
    total_ns: int
    ns_per_step: int
    pct_of_path: float


@frozen
class CategoryShare:
    """Kernel time of one category on the followed steps' critical paths."""

    category: str
    ns_per_step: int
    pct: float


@frozen
class StepShare:
    """One kind of time on the median step's critical path."""

    kind: str
    title: str
    ns: int
    pct: float


@frozen
class MedianStep:
    """The median step's critical path: what one typical step is made of."""

    step: int
    pid: int
    measured_ns: int
    replayed_ns: int
    bound: str  # host, device, capture
    host_period_ns: int
    device_period_ns: int
    composition: tuple[StepShare, ...]
    top_items: tuple[PathItem, ...]

    def to_json(self) -> dict[str, object]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "composition": [asdict(c) for c in self.composition],
                "top_items": [asdict(i) for i in self.top_items]}


@frozen
class ReplayError:
    """|replayed - measured| / measured over the replayed steps, percent (None: no step)."""

    median: float | None
    max: float | None


@frozen
class CriticalPath:
    METRIC_ID: ClassVar[str] = "critical_path"

    step_source: str  # steps, whole_capture
    step_detail: str
    steps_replayed: int
    steps_total: int
    sampled: bool
    steps_followed: int
    measured_step_ns: int
    replayed_step_ns: int
    replay_error_pct: ReplayError
    device_bound_steps: int | None
    composition: tuple[PathShare, ...]
    kernel_categories: tuple[CategoryShare, ...]  # largest first
    top_items: tuple[PathItem, ...]
    median_step: MedianStep | None
    trust: PathTrust
    graph: PathGraph
    latencies: Mapping[str, int | None]

    def to_json(self) -> dict[str, object]:
        return {
            "step_source": self.step_source,
            "step_detail": self.step_detail,
            "steps_replayed": self.steps_replayed,
            "steps_total": self.steps_total,
            "sampled": self.sampled,
            "steps_followed": self.steps_followed,
            "measured_step_ns": self.measured_step_ns,
            "replayed_step_ns": self.replayed_step_ns,
            "replay_error_pct": asdict(self.replay_error_pct),
            "device_bound_steps": self.device_bound_steps,
            "composition": [asdict(c) for c in self.composition],
            "kernel_categories": [asdict(c) for c in self.kernel_categories],
            "top_items": [asdict(i) for i in self.top_items],
            "median_step": None if self.median_step is None else self.median_step.to_json(),
            "trust": asdict(self.trust),
            "graph": {**asdict(self.graph), "counts": dict(self.graph.counts)},
            "latencies": dict(self.latencies),
        }


@frozen
class PathBound:
    """The largest kind on the median step's critical path after a change."""

    kind: str
    title: str
    pct: float


@frozen
class WhatIfRow:
    """One change replayed: the step and window measured and predicted, and the gains."""

    change: str  # host, launch, copies, ..., kernel:SELECTOR=Kx, fusion, slow_rank
    measured_step_ns: int
    predicted_step_ns: int
    measured_window_ns: int
    predicted_window_ns: int
    gain_step_ns: int
    gain_window_ns: int
    predicted_step_p10_ns: int
    predicted_step_p90_ns: int
    changed_nodes: int  # 0: nothing in the trace to change
    source: str  # built-in, --what-if, automatic
    bound: PathBound | None
    note: str | None


@frozen
class WhatIf:
    METRIC_ID: ClassVar[str] = "what_if"

    rows: tuple[WhatIfRow, ...]
    steps_replayed: int
    steps_total: int
    sampled: bool

    def row(self, change: str) -> WhatIfRow | None:
        return next((r for r in self.rows if r.change == change), None)

    def to_json(self) -> dict[str, object]:
        return {"rows": [asdict(r) for r in self.rows], "steps_replayed": self.steps_replayed,
                "steps_total": self.steps_total, "sampled": self.sampled}


@frozen
class SanityCheck:
    """One capture check (metrics/capture.py): what it found, and its time inside the GPU window.
    The counts below it are the check's own (report.json holds those its check has)."""

    id: str  # too_little_data, jit_compile, lazy_loading, startup, autotuning, program_failed, diagnostics
    found: bool
    summary: str
    time_ns: int
    pct_of_window: float
    kernels: int | None = None  # too_little_data
    kernel_ns: int | None = None  # too_little_data
    steps: int | None = None  # too_little_data
    step_ns: int | None = None  # too_little_data
    compilers: tuple[str, ...] | None = None  # jit_compile
    launches: int | None = None  # lazy_loading
    calls: int | None = None  # startup
    variants: int | None = None  # autotuning

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"id": self.id, "found": self.found, "summary": self.summary,
                                  "time_ns": self.time_ns, "pct_of_window": self.pct_of_window}
        for name in _CHECK_COUNTS:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


_CHECK_COUNTS = ("kernels", "kernel_ns", "steps", "step_ns", "compilers", "launches", "calls", "variants")


@frozen
class ProfilerDiagnostic:
    """A warning or error the profiler wrote about its own capture, classified."""

    severity: str
    text: str
    kind: str  # analysis/capture.py KINDS
    events_may_be_missing: bool


@frozen
class ContextCall:
    """The call that created the CUDA context, and how long it took."""

    api: str
    ns: int


@frozen
class RunFacts:
    """What the capture says about how the program ran (metrics/capture.py `run`)."""

    outcome: str  # profiler_failed, profiler_conflict, program_failed, killed, interrupted, cuda_not_traced, ...
    ending: Ending | None  # the decisive line of the program's output
    streams: int
    cuda_api_table: bool
    cuda_calls: int
    launch_calls: int
    cuda_trace_requested: bool | None
    cuda_call_kinds: tuple[ApiCalls, ...]  # most calls first
    context_call: ContextCall | None
    kernels: int
    nvtx_ranges: int

    def to_json(self) -> dict[str, object]:
        end = self.ending
        return {
            "outcome": self.outcome,
            "ending": None if end is None else {"kind": end.kind, "line": end.line, "context": end.context,
                                                 "stream": end.stream, "pid": end.pid, "where": end.where,
                                                 "stack": list(end.stack), "conflict": end.conflict},
            "streams": self.streams,
            "cuda_api_table": self.cuda_api_table,
            "cuda_calls": self.cuda_calls,
            "launch_calls": self.launch_calls,
            "cuda_trace_requested": self.cuda_trace_requested,
            "cuda_call_kinds": [asdict(k) for k in self.cuda_call_kinds],
            "context_call": None if self.context_call is None else asdict(self.context_call),
            "kernels": self.kernels,
            "nvtx_ranges": self.nvtx_ranges,
        }


@frozen
class CaptureSlice:
    """The trace is a window of a longer capture: cut from it, begun after a delay, or by a trigger."""

    how: str  # cut, delay, trigger
    start_ns: int | None
    end_ns: int | None
    window_ns: int | None
    offset_ns: int | None
    capture_ns: int | None
    source: str | None
    trigger: str | None = None  # how == "trigger"

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        if self.how != "trigger":
            del out["trigger"]
        return out


@frozen
class CarriedFact(CarriedWork):
    """Work queued before the capture, and the call that drained it (a synchronize) if one did."""

    drained_by: str | None = None

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "devices": list(self.devices)}


@frozen
class MissingEvents:
    """Events the trace lacks: kernels without a launch call, stream waits without their records,
    the trace's own sampling or filtering marks."""

    launches: int
    kernels: int
    wait_calls: int
    sync_records: int | None  # None: not read (too few waits to matter)
    waits_unseen: bool
    sampled: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "sampled": list(self.sampled)}


@frozen
class ProfilerOverhead:
    """Profiler settings that inflate host times (with_stack, profile_memory), with their events."""

    settings: tuple[str, ...]
    events: Mapping[str, int]

    def to_json(self) -> dict[str, object]:
        return {"settings": list(self.settings), "events": dict(self.events)}


@frozen
class Captured:
    """What the capture is: the program, a slice of a longer run, carried work, missing events,
    profiler overhead."""

    program: Program | None
    slice: CaptureSlice | None
    carried: CarriedFact | None
    missing: MissingEvents
    overhead: ProfilerOverhead | None

    def to_json(self) -> dict[str, object]:
        return {
            "program": None if self.program is None else self.program.to_json(),
            "slice": None if self.slice is None else self.slice.to_json(),
            "carried": None if self.carried is None else self.carried.to_json(),
            "missing": self.missing.to_json(),
            "overhead": None if self.overhead is None else self.overhead.to_json(),
        }


@frozen
class Capture:
    METRIC_ID: ClassVar[str] = "capture"

    window_start_ns: int | None
    window_end_ns: int | None
    startup_ns: int
    startup_pct_of_window: float
    steady_state: bool
    steady_start_ns: int | None
    checks: tuple[SanityCheck, ...]  # too_little_data first
    diagnostics: tuple[ProfilerDiagnostic, ...]
    run: RunFacts
    captured: Captured
    thresholds: Mapping[str, int | float]

    def check(self, check_id: str) -> SanityCheck | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def too_little(self) -> bool:
        """The too_little_data check found too little to judge."""
        return any(c.id == "too_little_data" and c.found for c in self.checks)

    def one_shot_program(self) -> Program | None:
        """The program when it runs its work once, else None."""
        program = self.captured.program
        return program if program is not None and program.one_shot else None

    def to_json(self) -> dict[str, object]:
        return {
            "window_start_ns": self.window_start_ns,
            "window_end_ns": self.window_end_ns,
            "startup_ns": self.startup_ns,
            "startup_pct_of_window": self.startup_pct_of_window,
            "steady_state": self.steady_state,
            "steady_start_ns": self.steady_start_ns,
            "checks": [c.to_json() for c in self.checks],
            "diagnostics": [asdict(d) for d in self.diagnostics],
            "run": self.run.to_json(),
            "captured": self.captured.to_json(),
            "thresholds": dict(self.thresholds),
        }
