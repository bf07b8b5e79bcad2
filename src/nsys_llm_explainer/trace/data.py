"""TraceData: the columnar view of one trace that every metric reads, whatever the format.

A source (trace/nsys/ for Nsight Systems SQLite exports, trace/kineto/ for PyTorch profiler
traces) subclasses TraceData and implements the loaders below. Each loader returns Columns
with the documented column names, or raises Unavailable(reason) when the trace cannot tell.
Results are built once and cached, also when metrics in several threads ask at the same time.

Columns every source provides (int64 numpy arrays; times in integer nanoseconds on one clock):

- kernels(): start, end, dur, device, stream, corr, pid, name_id [graph_node_id, graph_id]
  (pid: the host process that launched the kernel; corr joins it to runtime() rows of that
  process; name_id keys kernel_names())
- runtime(): start, end, corr, api, pid, tkey (api: index into runtime_api_names();
  tkey: a thread key unique across processes)
- nvtx(): start, end (-1: unended), event_type, pid, tkey, name (index into nvtx_names())
- memcpy(): start, end, dur, device, stream, corr, pid, bytes, copy_kind, src_kind,
  dst_kind, src_device, dst_device (copy_kind/src_kind/dst_kind: CUPTI enum codes)
- memset(): start, end, dur, device, stream, corr, pid, bytes, mem_kind
- sync(): start, end, dur, device, stream, corr, pid, sync_type [record_stream, record_corr:
  for a stream wait on an event, the stream the event was recorded on and the correlation id
  of its record call, -1 when unknown; only where the format records them]
- graph_execs(): start, end, dur, device, stream, corr, pid, graph_id, graph_exec_id (one row
  per execution of a CUDA graph traced whole: the kernels inside it are not in kernels(); corr
  joins the graph launch call in runtime())

Only some formats have these (the base class raises Unavailable):

- operators(): start, end, pid, tkey, name (index into operator_names()), ext (External id),
  shape (index into operator_shapes(): (Input Dims, Input type) JSON text; -1: not recorded),
  concrete (index into operator_concrete_inputs(): the Concrete Inputs list; -1: not recorded)
- python_functions(): start, end, pid, tkey, name (index into operator_names()), py_id, py_parent
- step_marks(): NVTX range names the format itself says delimit steps (ProfilerStep#N)
- stream_types(): pid, stream, type (1 blocking, 2 non-blocking, 3 the legacy default stream)
- gpu_annotations(): start, end, device, name (index into gpu_annotation_names()): the
  GPU-side copy of host ranges (PyTorch profiler gpu_user_annotation: a step's own GPU window)
- os_calls(): start, end, pid, tkey, name (index into os_call_names()): OS runtime calls
  (Nsight Systems OSRT_API)
- cpu_samples(): time, pid, tkey, symbol (index into cpu_sample_names()): CPU samples with
  their leaf frame (Nsight Systems COMPOSITE_EVENTS / SAMPLING_CALLCHAINS)
- program_output(): the tail of the program's captured stdout and stderr (Nsight Systems
  ProcessStreams); cuda_trace_requested(): whether the capture asked for CUDA tracing
- kernel_dims(): name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z, dur: one row
  per kernel record as written (not aligned with kernels(): read on demand, for matching
  Nsight Compute results to the trace's launches)
- command_lines(): the command lines the capture records (Nsight Systems META_DATA_CAPTURE
  COMMAND and ARGUMENT rows; a PyTorch profiler trace's metadata fields that name a command
  or a model); process_names(pids): what the trace calls those processes
- capture_span(): how long the whole capture ran and whether the trace is a window of it
  (a window cut afterwards, --delay, a start trigger)
- profiler_options(): the profiler's own settings that slow the host down (PyTorch
  profiler with_stack, profile_memory, record_shapes ...) and whether the trace says it was
  sampled or filtered
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import CaptureInfo, Distributed, GpuInfo, Schema, TraceFormat
from nsys_llm_explainer.trace import deadline
from nsys_llm_explainer.trace.columns import Columns

T = TypeVar("T")
MISSING = object()
_WAIT_STEP_S = 0.1  # how often a metric waiting for another thread's build checks --timeout
UNNAMED_KERNEL = "(unnamed kernel)"


class Unavailable(Exception):
    """A table or column a metric needs is missing; the metric becomes Skipped(reason)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@frozen
class ClockOrigin:
    """Where a trace's timestamp 0 lies on the wall clock (UTC epoch nanoseconds), so that
    traces written by different processes or hosts can be put on one time axis."""

    epoch_ns: int
    source: str  # what it was read from, e.g. "TARGET_INFO_SESSION_START_TIME.utcEpochNs"


@frozen
class Diagnostic:
    """A message the profiler wrote about its own capture (e.g. nsys DIAGNOSTIC_EVENT)."""

    severity: str  # "error", "warning" or "info"
    text: str
    time_ns: int | None = None


@frozen
class StreamText:
    """The tail of one captured output stream of the program (stdout or stderr)."""

    pid: int
    stream: str  # "stdout" or "stderr"
    text: str


@frozen
class CommandLine:
    """A command line the capture records. Untrusted and private (paths, tokens): only
    analysis/program.py reads it, to name the program and the model; never shown as is."""

    pid: int | None
    argv: tuple[str, ...]
    source: str  # the table or field it was read from
    model: str | None = None  # a model a metadata field names (PyTorch profiler traces)


@frozen
class CaptureSpan:
    """The whole capture the trace comes from, on the events' clock where it can tell."""

    duration_ns: int | None  # how long the capture ran (Nsight Systems ANALYSIS_DETAILS.duration)
    start_ns: int | None  # its start and stop as the trace records them (clock not checked)
    stop_ns: int | None
    cut: tuple[int, int] | None = None  # a window cut from it afterwards (events' clock)
    cut_source: str | None = None  # where the cut is recorded
    delay_ns: int = 0  # the capture began this long after the program (nsys --delay)
    trigger: str | None = None  # what started the capture when not the program's launch


@frozen
class ProfilerOptions:
    """Profiler settings that change what the host's times mean, and sampling marks."""

    settings: dict[str, bool]  # e.g. with_stack, profile_memory, record_shapes: on or off
    sampled: tuple[str, ...] = ()  # fields that say the trace was sampled, filtered or truncated


def _span(cols: Columns) -> tuple[int, int] | None:
    return (int(cols.start.min()), int(cols.end.max())) if len(cols) else None


class Offers:
    """Parts of a build offered to idle metric threads (analysis/idle_sweep.py offers them,
    runtime/runner.py takes them); `wake` tells the waiting threads that one came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tasks: collections.deque[Callable[[], None]] = collections.deque()
        self.wake: Callable[[], None] = lambda: None

    def offer(self, task: Callable[[], None]) -> None:
        with self._lock:
            self._tasks.append(task)
        self.wake()

    def take(self) -> Callable[[], None] | None:
        with self._lock:
            return self._tasks.popleft() if self._tasks else None

    def withdraw(self, tasks: list[Callable[[], None]]) -> None:
        """Remove those of `tasks` nobody took (they hold the build's data)."""
        gone = {id(t) for t in tasks}
        with self._lock:
            self._tasks = collections.deque(t for t in self._tasks if id(t) not in gone)


class TraceData:
    """Lazily loaded, cached columns of one opened trace. Subclasses implement the loaders."""

    def __init__(self, schema: Schema, kernel_name: str = "demangled") -> None:
        self.schema = schema
        self.kernel_name_mode = kernel_name  # demangled, short or mangled (what sources have)
        self.warnings: list[str] = []
        self.row_counts: dict[str, int] = {}
        self._cache: dict[str, Any] = {}
        self._spans: dict[str, tuple[int, int] | None] = {}
        self._lock = threading.Lock()  # guards the dicts above; builds run outside it
        self._building: dict[str, threading.Lock] = {}  # key -> held while it is built
        # Threads the run's metrics use (runtime/runner.plan): from 2, a build may offer
        # its independent parts to idle metric threads (analysis/idle_sweep.py) through `parts`.
        self.threads = 1
        self.parts = Offers()

    @property
    def format(self) -> TraceFormat:
        """Which format this is (the schema says: its probe, or the reader that built it)."""
        return self.schema.format

    @property
    def format_name(self) -> str:
        """What report sections say fed them ("Nsight Systems SQLite export", ...)."""
        return self.schema.format.label

    # -- cache ------------------------------------------------------------------------
    def cached(self, key: str, build: Callable[[], T]) -> T:
        """The value under `key`, built once even when metrics in several threads ask at
        the same time (the others wait for it; keys depend on each other without cycles,
        so waits cannot deadlock)."""
        value = self._cache.get(key, MISSING)
        if value is not MISSING:
            return value  # type: ignore[no-any-return]
        with self._lock:
            key_lock = self._building.setdefault(key, threading.Lock())
        while not key_lock.acquire(timeout=_WAIT_STEP_S):
            deadline.check()
        try:
            value = self._cache.get(key, MISSING)
            if value is MISSING:
                deadline.check()  # derived phases are long numpy work that --timeout must bound
                value = self._prefetched(key)
                if value is MISSING:
                    value = build()
                    with self._lock:
                        self._cache[key] = value
            return value  # type: ignore[no-any-return]
        finally:
            key_lock.release()

    def _prefetched(self, key: str) -> Any:
        """A value loaded ahead of time elsewhere (e.g. a helper process); MISSING: build it."""
        return MISSING

    def put(self, key: str, value: Any) -> None:
        """Store a by-product of a build (e.g. the name list a table loader decoded)."""
        with self._lock:
            self._cache[key] = value

    def cache_keys(self) -> list[str]:
        return list(self._cache)

    def cached_value(self, key: str) -> Any:
        return self._cache[key]

    def release_all(self) -> None:
        """Drop every cached result (once nothing reads them any more: the end of explain)."""
        with self._lock:
            self._cache.clear()

    def release(self, *keys: str) -> None:
        """Drop cached results no later reader needs (a later call rebuilds them).

        A key ending in ":" drops every key with that prefix. Tables keep their time span,
        which the trace summary reads after all metrics have run.
        """
        with self._lock:
            for key in keys:
                for k in [k for k in self._cache if k == key or (key.endswith(":") and k.startswith(key))]:
                    value = self._cache.pop(k)
                    if isinstance(value, Columns) and k not in self._spans:
                        self._spans[k] = _span(value)

    def span(self, table_key: str) -> tuple[int, int] | None:
        """(min start, max end) of a loaded table ("kernels", "runtime"), None when empty.

        Raises Unavailable like the table's loader."""
        if table_key not in self._spans:
            self._spans[table_key] = _span(getattr(self, table_key)())
        return self._spans[table_key]

    # -- what a source provides ----------------------------------------------------------
    def kernels(self) -> Columns:
        raise Unavailable("this trace format has no GPU kernel records")

    def kernel_names(self, name_ids: np.ndarray) -> dict[int, str]:
        raise Unavailable("this trace format has no kernel names")

    def kernel_dims(self) -> Columns:
        raise Unavailable(f"an {self.format_name} does not record kernels' grid and block sizes")

    def runtime(self) -> Columns:
        raise Unavailable("this trace format has no CUDA API records")

    def runtime_api_names(self) -> list[str]:
        return []

    def nvtx(self) -> Columns:
        raise Unavailable("this trace format has no annotation ranges")

    def nvtx_names(self) -> list[str]:
        return []

    def memcpy(self) -> Columns:
        raise Unavailable("this trace format has no memcpy records")

    def memset(self) -> Columns:
        raise Unavailable("this trace format has no memset records")

    def sync(self) -> Columns:
        raise Unavailable("this trace format has no synchronization records")

    def graph_execs(self) -> Columns:
        raise Unavailable("this trace format has no whole-graph execution records")

    def operators(self) -> Columns:
        raise Unavailable(
            f"operators are recorded only in PyTorch profiler traces, not in an {self.format_name}"
        )

    def operator_names(self) -> list[str]:
        return []

    def operator_shapes(self) -> list[tuple[str, str]]:
        return []

    def operator_concrete_inputs(self) -> list[Any]:
        """Per id: the printed argument values (PyTorch 2.1+ "Concrete Inputs")."""
        return []

    def kernel_mangled_names(self, name_ids: np.ndarray) -> dict[int, str]:
        """Mangled names of the kernels whose name_id is given, where the trace records them
        (Nsight Systems exports); {} when the format has none."""
        return {}

    def python_functions(self) -> Columns:
        raise Unavailable(f"an {self.format_name} has no Python call stacks")

    def step_marks(self) -> list[str]:
        return []

    def stream_types(self) -> Columns:
        raise Unavailable(f"an {self.format_name} does not record stream types")

    def step_ranges(self) -> Columns:
        """The ranges step_marks() names: start, end, pid, tkey, step (N)."""
        raise Unavailable(f"an {self.format_name} marks no profiler steps")

    def gpu_annotations(self) -> Columns:
        raise Unavailable(f"an {self.format_name} has no GPU-side annotations")

    def gpu_annotation_names(self) -> list[str]:
        return []

    def os_calls(self) -> Columns:
        raise Unavailable(f"an {self.format_name} has no OS runtime calls")

    def os_call_names(self) -> list[str]:
        return []

    def cpu_samples(self) -> Columns:
        raise Unavailable(f"an {self.format_name} has no CPU samples")

    def cpu_sample_names(self) -> list[str]:
        return []

    def program_output(self) -> list[StreamText]:
        """The tail of each captured stdout/stderr stream ([] when the format keeps none).
        Holds paths and user text: only analysis/program.py reads it, to quote one
        scrubbed line."""
        return []

    def cuda_trace_requested(self) -> bool | None:
        """Whether the capture asked for CUDA tracing; None when the trace does not say."""
        return None

    def command_lines(self) -> list[CommandLine]:
        """The command lines the capture records ([] when it records none). Private: only
        analysis/program.py reads them."""
        return []

    def process_names(self, pids: list[int]) -> dict[int, str]:
        """What the trace calls these processes ({} when it does not say). Private like
        command_lines()."""
        return {}

    def capture_span(self) -> CaptureSpan | None:
        """The whole capture this trace comes from, when the trace records it."""
        return None

    def profiler_options(self) -> ProfilerOptions:
        """The profiler's settings that change the host's times, and sampling marks."""
        return ProfilerOptions({})

    def format_details(self) -> dict[str, int | str] | None:
        """The format's own version fields (report.json trace.kineto); None when it has none."""
        return None

    def format_limitations(self) -> list[str]:
        """What this format cannot provide, for the report's limitations."""
        return []

    def distributed(self) -> Distributed | None:
        """Rank, world size and backend when the trace records them."""
        return None

    def gpus(self) -> list[GpuInfo]:
        """GPU descriptions the trace carries ([] when it carries none)."""
        return []

    def gpus_missing_reason(self) -> str:
        """Why gpus() is empty, for the sections that need GPU models."""
        return "the trace does not describe its GPUs"

    def enum_labels(self, which: str) -> dict[int, str] | None:
        """Labels of a CUPTI enum the trace defines ("copy": memcpy kinds, "mem": memory
        kinds); None: use the built-in CUPTI values."""
        return None

    def graph_trace_mode(self) -> str | None:
        """CUDA-graph trace mode of the capture: 'graph', 'node', 'mixed' or None (unknown)."""
        return None

    def clock_origin(self) -> ClockOrigin:
        """The wall-clock time of timestamp 0; Unavailable when the trace does not record it."""
        raise Unavailable("the trace does not record the wall-clock time of its timestamps")

    def diagnostics(self) -> list[Diagnostic]:
        """Messages the profiler recorded about its own capture (possibly missing events)."""
        return []

    def table_counts(self) -> dict[str, int]:
        """Source tables (or event categories) -> rows, for the report's trace facts."""
        return {}

    def kernel_rows_estimate(self) -> int:
        """Upper bound of the kernel rows, cheap (decides whether metrics run in threads)."""
        return 0

    def missing_names(self) -> int:
        """How many referenced names the trace lacks (shown as '(unknown name) #id')."""
        return 0

    def capture_info(self, pids: list[int]) -> CaptureInfo:
        """Capture metadata for --include-capture-info (secrets redacted): processes
        [{pid, name}], settings [{name, value}], environment [{process, name, value}] and
        redacted_values (how many values were replaced). Never command lines or
        environment values that look secret."""
        return {"processes": [{"pid": p, "name": None} for p in pids], "settings": [], "environment": [],
                "redacted_values": 0}

    def kernel_pid_note(self, pids: np.ndarray) -> str | None:
        """Why some kernels' pids (kernels().pid) are not real processes, in this format's
        terms; None when all are."""
        bad = int((pids < 0).sum())
        return f"{bad:,} kernels belong to no known process (pid -1)" if bad else None

    @property
    def interruptible(self) -> Any:
        """The object deadline.limit installs its progress handler on (None: numpy only)."""
        return None

    def interrupt(self) -> None:
        """Stop long reads in other threads (Ctrl-C while metrics run in threads)."""

    def close(self) -> None:
        """Release files, connections and helper processes."""
