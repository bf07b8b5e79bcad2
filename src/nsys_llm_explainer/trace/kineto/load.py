"""KinetoTraceData: a PyTorch profiler trace as the columns every metric reads.

The file is read once, when it is opened (collect.py); each table is then built from the
collected arrays on first use. How categories map to tables, and what the format cannot
tell, is documented in docs/kineto.md.

- kernels: `kernel` events. Their pid is the host process of the runtime call with the same
  correlation id (ids are unique within a file), so the (pid, corr) launch join works.
- runtime: `cuda_runtime` and `cuda_driver` events (HIP calls on ROCm use the same names).
- nvtx: host ranges, i.e. `user_annotation` (record_function, ProfilerStep#N) and `cpu_op`
  (aten and user operators): the ranges Nsight Systems shows for the same program run with
  emit_nvtx, so range metrics and kernel attribution work the same on both formats.
- memcpy/memset/sync: `gpu_memcpy`, `gpu_memset`, `cuda_sync`; copy and memory kinds come
  from the event name ("Memcpy HtoD (Pageable -> Device)").
- operators/python: the operator view only these files carry (operators metric).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from nsys_llm_explainer.model import GpuInfo, Schema
from nsys_llm_explainer.trace.clean import clamp_sizes, drop_duplicate_rows, total_duration_problem
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import TraceData, Unavailable
from nsys_llm_explainer.trace.kineto import collect as kc
from nsys_llm_explainer.trace.kineto import metadata
from nsys_llm_explainer.trace.names import api_base_name

FORMAT_ID = "kineto-json"
NVTX_PUSH_POP = 59  # the NVTX event type of nested per-thread ranges, which these are
MAX_TIME_NS = 1 << 62
MAX_PID = (1 << 24) - 1  # the launch join packs pids into 24 bits
KERNEL_IDENTITY = ("device", "stream", "start", "end", "corr", "pid")
# CUPTI memcpy kinds, and the Nsight Systems memory-kind codes memory_transfers expects.
COPY_KINDS = {"HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7,
              "DtoD": 8, "HtoH": 9, "PtoP": 10}
MEM_KINDS = {"pageable": 0, "pinned": 1, "device": 2, "array": 3, "managed": 4,
             "device static": 5, "managed static": 6}
MEM_LABELS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed",
              5: "Device Static", 6: "Managed Static", 7: "Unknown"}
UNKNOWN_MEM = 7
SYNC_KINDS = {"event sync": 1, "stream wait event": 2, "stream sync": 3, "context sync": 4}
SYNC_LABELS = {0: "Unknown", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
_MEMCPY_NAME = re.compile(r"Memcpy\s+(\w+)(?:\s*\(\s*([\w ]+?)\s*->\s*([\w ]+?)\s*\))?", re.IGNORECASE)
_MEMSET_NAME = re.compile(r"Memset\s*\(\s*([\w ]+?)\s*\)", re.IGNORECASE)
_GRAPH_LAUNCH = re.compile(r"^(cu(da)?|hip)GraphLaunch")
HOST_KINDS = (kc.RUNTIME, kc.USER, kc.OP, kc.PYTHON)


def _arr(values: Any) -> np.ndarray:
    return np.frombuffer(values, dtype=np.int64).copy() if len(values) else np.empty(0, np.int64)


class KinetoTraceData(TraceData):
    """Columns of one PyTorch profiler trace, built from one pass over the file."""

    format_name = "PyTorch profiler trace (Kineto JSON)"
    format_id = FORMAT_ID

    def __init__(self, collected: kc.Collected, top: dict[str, Any], kernel_name: str = "demangled") -> None:
        schema = Schema(tables={}, kernel_table=None, meta_table=None, nsys_version=None,
                        export_schema_version=None)
        super().__init__(schema, kernel_name)
        self.c = collected
        self.top = top
        self.info = metadata.format_info(top)
        self.warnings.extend(metadata.bad_event_warnings(collected.bad))
        self._pid_of_proc = self._proc_pids()
        self._corr_pid: tuple[np.ndarray, np.ndarray] | None = None

    # -- ids ---------------------------------------------------------------------------
    def _proc_pids(self) -> np.ndarray:
        """Per interned pid value: the pid the report shows (ints as written; text or
        out-of-range values get numbers counting down from MAX_PID)."""
        out = []
        synthetic = MAX_PID
        for value in self.c.procs.values_list():
            if type(value) is int and 0 <= value < MAX_PID - len(self.c.procs):
                out.append(value)
            else:
                out.append(synthetic)
                synthetic -= 1
        return np.array(out or [0], dtype=np.int64)

    def _host_pids(self) -> np.ndarray:
        procs = [np.unique(_arr(self.c.tables[k].proc)) for k in HOST_KINDS]
        return np.unique(self._pid_of_proc[np.concatenate(procs)]) if procs else np.empty(0, np.int64)

    def _times(self, t: kc.Table, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """start, end and a keep-mask (rows with times in [0, 2^62))."""
        start, dur = _arr(t.start), _arr(t.dur)
        end = start + dur
        keep = (start >= 0) & (end < MAX_TIME_NS)
        if not keep.all():
            self.warnings.append(
                f"{what}: {int((~keep).sum())} of {len(keep)} events ignored "
                "(timestamps outside [0, 2^62) ns)"
            )
        return start, end, keep

    def _check(self, what: str, cols: Columns) -> Columns:
        problem = total_duration_problem(what, cols.cols)
        if problem:
            raise Unavailable(problem)
        return cols

    def _corr_index(self) -> tuple[np.ndarray, np.ndarray]:
        """Runtime correlation ids (sorted, distinct) and the host pid of each."""
        if self._corr_pid is None:
            rt = self.runtime()
            has = rt.corr >= 0
            corr, first = np.unique(rt.corr[has], return_index=True)
            self._corr_pid = (corr, rt.pid[has][first])
        return self._corr_pid

    def _launch_pids(self, corr: np.ndarray) -> np.ndarray:
        """Per GPU row: the pid of the runtime call with its correlation id; when none,
        the only host process if there is one, else -1."""
        keys, pids = self._corr_index()
        pos = np.minimum(np.searchsorted(keys, corr), max(len(keys) - 1, 0))
        found = (corr >= 0) & (len(keys) > 0)
        if len(keys):
            found &= keys[pos] == corr
        hosts = self._host_pids()
        fallback = int(hosts[0]) if len(hosts) == 1 else -1
        return np.where(found, pids[pos] if len(keys) else fallback, fallback).astype(np.int64)

    def _flow_corr(self, t: kc.Table, corr: np.ndarray, gpu_side: bool) -> np.ndarray:
        """Correlation ids from ac2g flow events for rows whose args carry none."""
        missing = np.flatnonzero(corr < 0)
        if not len(missing) or not (self.c.flows_end if gpu_side else self.c.flows_start):
            return corr
        corr = corr.copy()
        if gpu_side:
            ends = self.c.flows_end
            for i in missing.tolist():
                corr[i] = ends.get((t.proc[i], t.thread[i], t.start[i]), -1)
        else:
            starts = {v: k for k, v in self.c.flows_start.items()}
            for i in missing.tolist():
                corr[i] = starts.get((t.proc[i], t.thread[i], t.start[i]), -1)
        return corr

    # -- tables ------------------------------------------------------------------------
    def kernels(self) -> Columns:
        return self.cached("kernels", self._load_kernels)

    def _load_kernels(self) -> Columns:
        t = self.c.tables[kc.KERNEL]
        start, end, keep = self._times(t, "kernel")
        corr = self._flow_corr(t, _arr(t.corr), gpu_side=True)
        cols = Columns("kernel", {
            "start": start, "end": end, "device": _arr(t.device), "stream": _arr(t.stream),
            "corr": corr, "name_id": _arr(t.name), "ext": _arr(t.ext),
        })
        if not keep.all():
            cols = cols.take(keep)
        cols = cols.with_columns(dur=cols.end - cols.start, pid=self._launch_pids(cols.corr))
        cols = cols.with_columns(graph_node_id=self._graph_nodes(cols.corr))
        cols = drop_duplicate_rows(cols, KERNEL_IDENTITY, self.warnings, "kernel")
        return self._check("kernel", cols)

    def _graph_nodes(self, corr: np.ndarray) -> np.ndarray:
        """Per kernel: 1 when its correlation id is a graph launch's (Kineto records every
        node kernel of a graph launch under the launch's id), else 0. The trace has no
        graph or node ids."""
        rt = self.runtime()
        names = self.runtime_api_names()
        graph = [i for i, n in enumerate(names) if _GRAPH_LAUNCH.match(n)]
        if not graph or not len(corr):
            return np.zeros(len(corr), np.int64)
        launch_corr = np.unique(rt.corr[np.isin(rt.api, graph) & (rt.corr >= 0)])
        return np.isin(corr, launch_corr).astype(np.int64)

    def kernel_names(self, name_ids: np.ndarray) -> dict[int, str]:
        names = self.c.names.values_list()
        return {int(i): names[int(i)] or "(unnamed kernel)" for i in np.unique(name_ids).tolist()}

    def runtime(self) -> Columns:
        return self.cached("runtime", self._load_runtime)

    def _load_runtime(self) -> Columns:
        t = self.c.tables[kc.RUNTIME]
        start, end, keep = self._times(t, "runtime")
        corr = self._flow_corr(t, _arr(t.corr), gpu_side=False)
        name = _arr(t.name)
        uniq, inverse = np.unique(name, return_inverse=True)
        names = self.c.names.values_list()
        base = [api_base_name(names[int(i)] or "(unnamed call)") for i in uniq]
        api_names: list[str] = []
        api = np.empty(0, np.int64)
        if len(uniq):
            distinct, code = np.unique(np.array(base, dtype=object), return_inverse=True)
            api_names, api = [str(a) for a in distinct], code[inverse].astype(np.int64)
        self.put("runtime_api_names", api_names)
        cols = Columns("runtime", {
            "start": start, "end": end, "corr": corr, "api": api,
            "pid": self._pid_of_proc[_arr(t.proc)] if len(t) else np.empty(0, np.int64),
            "tkey": _arr(t.thread), "ext": _arr(t.ext),
        })
        return self._check("runtime", cols.take(keep) if not keep.all() else cols)

    def runtime_api_names(self) -> list[str]:
        self.runtime()
        return self._cache["runtime_api_names"]  # type: ignore[no-any-return]

    def _ranges(self, kinds: tuple[int, ...], what: str) -> tuple[Columns, list[str]]:
        """Host ranges of `kinds` (start, end, pid, tkey, name code, kind, row), names."""
        parts = []
        for kind in kinds:
            t = self.c.tables[kind]
            start, end, keep = self._times(t, kc.KIND_NAMES[kind])
            parts.append(Columns(what, {
                "start": start, "end": end, "pid": self._pid_of_proc[_arr(t.proc)] if len(t) else start[:0],
                "tkey": _arr(t.thread), "name_id": _arr(t.name),
                "kind": np.full(len(t), kind, np.int64), "row": np.arange(len(t), dtype=np.int64),
            }).take(keep))
        cols = Columns(what, {k: np.concatenate([p[k] for p in parts]) for k in parts[0].names})
        uniq, code = np.unique(cols.name_id, return_inverse=True)
        names = self.c.names.values_list()
        labels = [names[int(i)] or "(unnamed range)" for i in uniq]
        return cols.with_columns(name=code.astype(np.int64)), labels

    def nvtx(self) -> Columns:
        return self.cached("nvtx", self._load_nvtx)

    def _load_nvtx(self) -> Columns:
        cols, labels = self._ranges((kc.USER, kc.OP), "nvtx")
        self.put("nvtx_names", labels)
        cols = Columns("nvtx", {
            "start": cols.start, "end": cols.end,
            "event_type": np.full(len(cols), NVTX_PUSH_POP, np.int64),
            "pid": cols.pid, "tkey": cols.tkey, "name": cols.name,
        })
        return self._check("nvtx", cols)

    def nvtx_names(self) -> list[str]:
        self.nvtx()
        return self._cache["nvtx_names"]  # type: ignore[no-any-return]

    def _gpu_activity(self, kind: int, what: str) -> Columns:
        """start, end, dur, device, stream, corr, pid, name_id, bytes, extra of one GPU kind."""
        t = self.c.tables[kind]
        start, end, keep = self._times(t, what)
        n = len(t)
        corr = _arr(t.corr)
        cols = Columns(what, {
            "start": start, "end": end, "device": _arr(t.device), "stream": _arr(t.stream),
            "corr": corr, "name_id": _arr(t.name),
            "bytes": _arr(t.bytes) if len(t.bytes) == n else np.zeros(n, np.int64),
            "extra": _arr(t.extra) if len(t.extra) == n else np.full(n, -1, np.int64),
        })
        if not keep.all():
            cols = cols.take(keep)
        return cols.with_columns(dur=cols.end - cols.start, pid=self._launch_pids(cols.corr))

    def _by_name(self, codes: np.ndarray, parse: Any, width: int) -> np.ndarray:
        """parse(name) per row of interned name ids, parsing each distinct name once."""
        names = self.c.names.values_list()
        uniq, inv = np.unique(codes, return_inverse=True)
        table = np.array([parse(names[int(i)]) for i in uniq], dtype=np.int64).reshape(-1, width)
        return table[inv] if len(codes) else np.empty((0, width), np.int64)

    def memcpy(self) -> Columns:
        return self.cached("memcpy", self._load_memcpy)

    def _load_memcpy(self) -> Columns:
        cols = self._gpu_activity(kc.MEMCPY, "gpu_memcpy")
        kinds = self._by_name(cols.name_id, _memcpy_kinds, 3)
        minus = np.full(len(cols), -1, np.int64)
        cols = cols.with_columns(copy_kind=kinds[:, 0], src_kind=kinds[:, 1], dst_kind=kinds[:, 2],
                                 src_device=minus, dst_device=minus)
        return self._check("gpu_memcpy", clamp_sizes(cols, "bytes", self.warnings, "memcpy"))

    def memset(self) -> Columns:
        return self.cached("memset", self._load_memset)

    def _load_memset(self) -> Columns:
        cols = self._gpu_activity(kc.MEMSET, "gpu_memset")
        cols = cols.with_columns(mem_kind=self._by_name(cols.name_id, _memset_kind, 1)[:, 0])
        return self._check("gpu_memset", clamp_sizes(cols, "bytes", self.warnings, "memset"))

    def sync(self) -> Columns:
        return self.cached("sync", self._load_sync)

    def _load_sync(self) -> Columns:
        cols = self._gpu_activity(kc.SYNC, "cuda_sync")
        kind = self._by_name(cols.extra, lambda n: SYNC_KINDS.get(str(n).strip().lower(), 0), 1)[:, 0]
        return self._check("cuda_sync", cols.with_columns(sync_type=kind))

    # -- the operator view (only this format has it) -------------------------------------
    def operators(self) -> Columns:
        return self.cached("operators", self._load_operators)

    def _load_operators(self) -> Columns:
        t = self.c.tables[kc.OP]
        if len(t) == 0:
            raise Unavailable("the trace has no cpu_op events (operators were not recorded)")
        start, end, keep = self._times(t, "cpu_op")
        cols = Columns("operators", {
            "start": start, "end": end, "pid": self._pid_of_proc[_arr(t.proc)],
            "tkey": _arr(t.thread), "name": _arr(t.name), "ext": _arr(t.ext), "shape": _arr(t.extra),
            "concrete": _arr(t.concrete),
        })
        return self._check("cpu_op", cols.take(keep) if not keep.all() else cols)

    def operator_names(self) -> list[str]:
        return [n or "(unnamed operator)" for n in self.c.names.values_list()]

    def operator_shapes(self) -> list[tuple[str, str]]:
        return self.cached("operator_shapes", self.c.shape_texts)

    def operator_concrete_inputs(self) -> list[Any]:
        return [list(v) if isinstance(v, tuple) else v for v in self.c.concrete.values_list()]

    def step_ranges(self) -> Columns:
        """ProfilerStep#N user annotations: start, end, pid, tkey, step (N)."""
        return self.cached("step_ranges", self._load_step_ranges)

    def _load_step_ranges(self) -> Columns:
        cols, labels = self._ranges((kc.USER,), "steps")
        number = np.array([metadata.profiler_step(n) for n in labels] or [-1], dtype=np.int64)
        step = number[cols.name] if len(cols) else cols.start[:0]
        sel = step >= 0
        return Columns("steps", {"start": cols.start[sel], "end": cols.end[sel], "pid": cols.pid[sel],
                                 "tkey": cols.tkey[sel], "step": step[sel]})

    def python_functions(self) -> Columns:
        return self.cached("python", self._load_python)

    def _load_python(self) -> Columns:
        t = self.c.tables[kc.PYTHON]
        if len(t) == 0:
            raise Unavailable("the trace has no python_function events (with_stack was off)")
        start, end, keep = self._times(t, "python_function")
        cols = Columns("python", {
            "start": start, "end": end, "pid": self._pid_of_proc[_arr(t.proc)], "tkey": _arr(t.thread),
            "name": _arr(t.name), "py_id": _arr(self.c.python_ids), "py_parent": _arr(self.c.python_parents),
        })
        return cols.take(keep) if not keep.all() else cols

    # -- facts -------------------------------------------------------------------------
    def step_marks(self) -> list[str]:
        """NVTX names that this format itself says delimit steps (ProfilerStep#N)."""
        return [n for n in self.nvtx_names() if metadata.profiler_step(n) >= 0]

    def gpus(self) -> list[GpuInfo]:
        return metadata.gpus(self.top)

    def gpus_missing_reason(self) -> str:
        return "the trace has no deviceProperties (GPU models, SM counts and memory sizes are unknown)"

    def graph_trace_mode(self) -> str | None:
        return "node"  # every kernel of a graph launch is its own event

    def enum_labels(self, which: str) -> dict[int, str] | None:
        return {"mem": dict(MEM_LABELS), "sync": dict(SYNC_LABELS)}.get(which)

    def table_counts(self) -> dict[str, int]:
        return dict(sorted(self.c.categories.items()))

    def kernel_rows_estimate(self) -> int:
        return len(self.c.tables[kc.KERNEL])

    def format_details(self) -> dict[str, Any]:
        return self.info

    def format_limitations(self) -> list[str]:
        return metadata.limitations(self)

    def distributed(self) -> dict[str, Any] | None:
        return metadata.distributed(self.top)

    def capture_info(self, pids: list[int]) -> dict[str, Any]:
        names = metadata.process_names(self.c.metadata)
        procs = self.c.procs.values_list()
        by_pid = {int(self._pid_of_proc[i]): names.get(v) for i, v in enumerate(procs)}
        return {"processes": [{"pid": p, "name": by_pid.get(p)} for p in pids]}


def _memcpy_kinds(name: str) -> tuple[int, int, int]:
    """'Memcpy HtoD (Pageable -> Device)' -> (copy kind, src memory kind, dst memory kind)."""
    m = _MEMCPY_NAME.search(name or "")
    if not m:
        return 0, UNKNOWN_MEM, UNKNOWN_MEM
    src = MEM_KINDS.get((m.group(2) or "").strip().lower(), UNKNOWN_MEM)
    dst = MEM_KINDS.get((m.group(3) or "").strip().lower(), UNKNOWN_MEM)
    return COPY_KINDS.get(m.group(1), 0), src, dst


def _memset_kind(name: str) -> int:
    m = _MEMSET_NAME.search(name or "")
    return MEM_KINDS.get(m.group(1).strip().lower(), UNKNOWN_MEM) if m else UNKNOWN_MEM
