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
  from the event name ("Memcpy HtoD (Pageable -> Device)"); a stream wait's recording side
  (`wait_on_stream`, `wait_on_cuda_event_record_corr_id`) becomes sync().record_stream and
  record_corr.
- operators/python: the operator view only these files carry (operators metric).

Open a PyTorch profiler (Kineto) trace as TraceData: read it once, fail with one line.

Facts the trace carries besides its events (gpus_of, distributed_of, command_lines_of,
profiler_options_of, format_info, ...): GPUs, ranks, versions, step names.

Some writers store deviceProperties as a Python literal in a string ("[{'id': 0, ...}]")
instead of a JSON list; both are read. Values of the wrong type become None, never errors."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from array import array
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.model import CaptureInfo, Distributed, GpuInfo, JsonObject, Schema, Setting, TraceFormat
from nsys_llm_explainer.trace.clean import (
    NAME_LIMIT,
    api_base_name,
    bounded,
    clamp_sizes,
    cut_warning,
    drop_duplicate_rows,
    total_duration_problem,
)
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import ClockOrigin, CommandLine, ProfilerOptions, TraceData, Unavailable
from nsys_llm_explainer.trace.kineto import collect as kc
from nsys_llm_explainer.trace.kineto import prefetch
from nsys_llm_explainer.trace.kineto.collect import NOT_A_TRACE, RUNTIME, Collected, read_events

NVTX_PUSH_POP = 59  # the NVTX event type of nested per-thread ranges, which these are
MAX_TIME_NS = 1 << 62
MAX_PID = (1 << 24) - 1  # the launch join packs pids into 24 bits
# Rows equal on all of these are one kernel written twice. Name and External id are part of
# it: the node kernels of a graph launch share its correlation id and, when they take no
# measurable time, their stream and timestamps as well.
KERNEL_IDENTITY = ("device", "stream", "start", "end", "corr", "pid", "name_id", "ext")
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
# Events that mark a host process: CUDA/HIP calls and operators. Python call-site and
# annotation events are left out: profilers write some of them (a tqdm monitor thread, say)
# under pid 0 or a GPU's pid.
HOST_KINDS = (kc.RUNTIME, kc.OP)
# The GPU events whose correlation ids may come from ac2g flow ends (_flow_corr).
FLOW_END_KINDS = (kc.KERNEL, kc.MEMCPY, kc.MEMSET, kc.SYNC)
# Timestamps at or above this (2001-09-09 in epoch ns) are wall-clock times, not times since
# the profiler's base time (which keeps them near 0 to 3 months).
EPOCH_NS_MIN = 10**18


def _view(values: array) -> np.ndarray:
    """A collected column as it is kept (its own integer type, _narrowed), without a copy."""
    return np.frombuffer(values, dtype=values.typecode)


def _arr(values: array) -> np.ndarray:
    """A collected column as int64 (a copy), whatever array type it is kept in."""
    return _view(values).astype(np.int64) if len(values) else np.empty(0, np.int64)


# Array types a collected column may be narrowed to, smallest first (each maps to the numpy
# integer type of the same code).
_NARROW = tuple((code, np.iinfo(np.dtype(code))) for code in "bBhHiI")


def _narrowed(values: array) -> array:
    """`values` in the smallest array type that holds each of them exactly, or `values` itself
    when none is smaller. A range check, not a cast that could wrap: _arr gives back the same
    int64 values."""
    if not len(values):
        return values
    wide = _view(values)
    lo, hi = int(wide.min()), int(wide.max())
    for code, info in _NARROW:
        if info.bits >= wide.itemsize * 8:
            break
        if info.min <= lo and hi <= info.max:
            out = array(code)
            out.frombytes(wide.astype(code).tobytes())
            return out
    return values


def _settle(c: kc.Collected) -> None:
    """Once every event is collected, keep only what the loaders can read, in as few bytes
    as it fits. The collected columns stay alive as long as the trace (tables are built from
    them on first use): 1.36M kernels hold 159 MiB of them as 64-bit columns.
    - Each column is kept in the smallest integer type that holds its values (_narrowed).
    - A side of the ac2g flow events is dropped when no row it could serve lacks a
      correlation id: flows only fill the ids of rows whose args carry none (_flow_corr)."""
    for t in c.tables:
        for f in dataclasses.fields(t):
            setattr(t, f.name, _narrowed(getattr(t, f.name)))
    c.python_ids, c.python_parents = _narrowed(c.python_ids), _narrowed(c.python_parents)
    for side, kinds in (("flow_ends", FLOW_END_KINDS), ("flow_starts", (kc.RUNTIME,))):
        if all(not len(c.tables[k].corr) or _view(c.tables[k].corr).min() >= 0 for k in kinds):
            setattr(c, side, kc.Flows())


class KinetoTraceData(TraceData):
    """Columns of one PyTorch profiler trace, built from one pass over the file."""

    def __init__(self, collected: kc.Collected, top: JsonObject, kernel_name: str = "demangled") -> None:
        schema = Schema(tables={}, kernel_table=None, meta_table=None, nsys_version=None,
                        export_schema_version=None, format=TraceFormat.KINETO)
        super().__init__(schema, kernel_name)
        _settle(collected)
        self.c = collected
        self.top = top
        self.info = format_info(top)
        self.warnings.extend(bad_event_warnings(collected.bad))
        self._bound_names()
        self._pid_of_proc = self._proc_pids()
        self._corr_pid: tuple[np.ndarray, np.ndarray] | None = None

    def _bound_names(self) -> None:
        """Cut event names longer than NAME_LIMIT (trace/clean.py), keeping their ids."""
        names = self.c.names
        lengths = [len(n) for n in names if type(n) is str and len(n) > NAME_LIMIT]
        if not lengths:
            return
        cut = kc.Interner()
        for n in names:
            cut.id(bounded(n) if type(n) is str else n)
        if len(cut) != len(names):  # two cut names alike: the ids would no longer line up
            raise ValueError("event names cut to the same text")
        self.c.names = cut
        self.warnings.append(cut_warning("event names", lengths))

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
        """Pids of the host processes: those of CUDA/HIP calls and operators, less the pids
        GPU events are written under (Kineto writes a GPU's events under its device id)."""
        return self.cached("host_pids", self._load_host_pids)

    def _load_host_pids(self) -> np.ndarray:
        host = np.unique(np.concatenate([_arr(self.c.tables[k].proc) for k in HOST_KINDS]))
        gpu = np.unique(np.concatenate([_arr(self.c.tables[k].proc) for k in kc.GPU_KINDS]))
        pids = np.unique(self._pid_of_proc[host]) if len(host) else np.empty(0, np.int64)
        gpu_pids = np.unique(self._pid_of_proc[gpu]) if len(gpu) else np.empty(0, np.int64)
        only_host = pids[~np.isin(pids, gpu_pids)]
        return only_host if len(only_host) else pids

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
        the only host process if there is one, else -1 (see kernel_pid_note)."""
        keys, pids = self._corr_index()
        pos = np.minimum(np.searchsorted(keys, corr), max(len(keys) - 1, 0))
        found = (corr >= 0) & (len(keys) > 0)
        if len(keys):
            found &= keys[pos] == corr
        hosts = self._host_pids()
        fallback = int(hosts[0]) if len(hosts) == 1 else -1
        return np.where(found, pids[pos] if len(keys) else fallback, fallback).astype(np.int64)

    def _flow_index(self, side: kc.Flows) -> tuple[np.ndarray, np.ndarray]:
        """Flow events of one side keyed by (thread, ts): keys as two columns, flow id of
        each (the first event in the file wins when several share a key)."""
        thread, ts, fid = _arr(side.thread), _arr(side.ts), _arr(side.id)
        order = np.lexsort((ts, thread))  # stable: file order within a key
        thread, ts, fid = thread[order], ts[order], fid[order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (thread[1:] != thread[:-1]) | (ts[1:] != ts[:-1])
        return np.stack([thread[first], ts[first]]), fid[first]

    def _flow_corr(self, t: kc.Table, corr: np.ndarray, gpu_side: bool) -> np.ndarray:
        """Correlation ids from ac2g flow events for rows whose args carry none: a flow's
        start lies on the runtime call, its end on the GPU event, both at the event's ts."""
        missing = np.flatnonzero(corr < 0)
        side = self.c.flow_ends if gpu_side else self.c.flow_starts
        if not len(missing) or not len(side):
            return corr
        keys, fids = self.cached("flows_end" if gpu_side else "flows_start", lambda: self._flow_index(side))
        out = _match_pairs(keys, fids, _arr(t.thread)[missing], _arr(t.start)[missing])
        corr = corr.copy()
        corr[missing] = out
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

    def kernel_dims(self) -> Columns:
        return self.cached("kernel_dims", self._load_kernel_dims)

    def _load_kernel_dims(self) -> Columns:
        """Grid and block of every kernel event (its args' grid and block; -1 where not written)."""
        t = self.c.tables[kc.KERNEL]
        n = len(t)
        if len(t.dims) != n or not n:
            raise Unavailable("the trace's kernel events record no grid and block sizes")
        per_id = self.c.launch_dims_packed()
        ids = _view(t.dims)
        grid, block = (np.asarray(packed, np.int64)[ids] for packed in per_id)
        if not ((grid >= 0) & (block >= 0)).any():
            raise Unavailable("the trace's kernel events record no grid and block sizes")
        cols: dict[str, np.ndarray] = {"name_id": _arr(t.name)}
        for prefix, packed in (("grid", grid), ("block", block)):
            ok = packed >= 0
            for axis, shift, mask in (("x", 0, (1 << 31) - 1), ("y", 31, 0xFFFF), ("z", 47, 0xFFFF)):
                cols[f"{prefix}_{axis}"] = np.where(ok, (packed >> shift) & mask, -1)
        cols["dur"] = _arr(t.dur)
        return Columns("kernel", cols)

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

    def _gpu_activity(self, kind: int, what: str, aux: dict[str, np.ndarray] | None = None) -> Columns:
        """start, end, dur, device, stream, corr, pid, name_id, bytes, extra of one GPU kind.

        Rows whose args carry no correlation id take it from their ac2g flow event; rows
        without a byte count take it from their runtime call (ROCm traces write the size
        only on the hipMemcpy/hipMemset call)."""
        t = self.c.tables[kind]
        start, end, keep = self._times(t, what)
        n = len(t)
        corr = self._flow_corr(t, _arr(t.corr), gpu_side=True)
        size = _arr(t.bytes) if len(t.bytes) == n else np.full(n, -1, np.int64)
        cols = Columns(what, {
            "start": start, "end": end, "device": _arr(t.device), "stream": _arr(t.stream),
            "corr": corr, "name_id": _arr(t.name), "bytes": size,
            "extra": _arr(t.extra) if len(t.extra) == n else np.full(n, -1, np.int64),
            **(aux or {}),
        })
        if not keep.all():
            cols = cols.take(keep)
        if (cols.bytes < 0).any():
            cols = cols.with_columns(bytes=self._call_bytes(cols.corr, cols.bytes))
        return cols.with_columns(dur=cols.end - cols.start, pid=self._launch_pids(cols.corr))

    def _call_bytes(self, corr: np.ndarray, size: np.ndarray) -> np.ndarray:
        """`size` where written; else the bytes/size arg of the runtime call with the same
        correlation id; else 0 (unknown)."""
        t = self.c.tables[kc.RUNTIME]
        out = size.copy()
        missing = np.flatnonzero(size < 0)
        if len(t.bytes) == len(t) and len(t):
            rt_corr = self._flow_corr(t, _arr(t.corr), gpu_side=False)
            rt_bytes = _arr(t.bytes)
            has = (rt_corr >= 0) & (rt_bytes >= 0)
            keys, first = np.unique(rt_corr[has], return_index=True)
            if len(keys):
                pos = np.minimum(np.searchsorted(keys, corr[missing]), len(keys) - 1)
                hit = keys[pos] == corr[missing]
                out[missing[hit]] = rt_bytes[has][first][pos[hit]]
        return np.maximum(out, 0)

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
        t = self.c.tables[kc.SYNC]
        n = len(t)
        aux = {name: _arr(values) if len(values) == n else np.full(n, -1, np.int64)
               for name, values in (("record_stream", t.wait_stream), ("record_corr", t.record_corr))}
        cols = self._gpu_activity(kc.SYNC, "cuda_sync", aux)
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
        return self.cached("operator_shapes", self._operator_shapes)

    def _operator_shapes(self) -> list[tuple[str, str]]:
        """(Input Dims, Input type) texts, each cut to NAME_LIMIT characters (trace/clean.py)."""
        texts = self.c.shape_texts()
        lengths = [len(x) for pair in texts for x in pair if len(x) > NAME_LIMIT]
        if not lengths:
            return texts
        self.warnings.append(cut_warning("operator input shapes", lengths))
        return [(bounded(dims), bounded(types)) for dims, types in texts]

    def operator_concrete_inputs(self) -> list[Any]:
        return [list(v) if isinstance(v, tuple) else v for v in self.c.concrete.values_list()]

    def step_ranges(self) -> Columns:
        """ProfilerStep#N user annotations: start, end, pid, tkey, step (N)."""
        return self.cached("step_ranges", self._load_step_ranges)

    def _load_step_ranges(self) -> Columns:
        cols, labels = self._ranges((kc.USER,), "steps")
        number = np.array([profiler_step(n) for n in labels] or [-1], dtype=np.int64)
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
    def gpu_annotations(self) -> Columns:
        """gpu_user_annotation events: start, end, device (the pid they are written under),
        name (index into gpu_annotation_names())."""
        return self.cached("gpu_annotations", self._load_gpu_annotations)

    def _load_gpu_annotations(self) -> Columns:
        t = self.c.tables[kc.GPU_USER]
        start, end, keep = self._times(t, kc.KIND_NAMES[kc.GPU_USER])
        device = self._pid_of_proc[_arr(t.proc)] if len(t) else start[:0]
        uniq, code = np.unique(_arr(t.name), return_inverse=True)
        names = self.c.names.values_list()
        self.put("gpu_annotation_names", [names[int(i)] or "(unnamed range)" for i in uniq])
        return Columns("gpu_annotations", {"start": start, "end": end, "device": device,
                                           "name": code.astype(np.int64)}).take(keep)

    def gpu_annotation_names(self) -> list[str]:
        self.gpu_annotations()
        return self._cache["gpu_annotation_names"]  # type: ignore[no-any-return]

    def step_marks(self) -> list[str]:
        """NVTX names that this format itself says delimit steps (ProfilerStep#N)."""
        return [n for n in self.nvtx_names() if profiler_step(n) >= 0]

    def gpus(self) -> list[GpuInfo]:
        return gpus_of(self.top)

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

    def format_details(self) -> dict[str, int | str]:
        return self.info

    def format_limitations(self) -> list[str]:
        return limitations_of(self.c, self.kernel_rows_estimate())

    def distributed(self) -> Distributed | None:
        return distributed_of(self.top)

    def command_lines(self) -> list[CommandLine]:
        return command_lines_of(self.top)

    def profiler_options(self) -> ProfilerOptions:
        return profiler_options_of(self.top)

    def capture_info(self, pids: list[int]) -> CaptureInfo:
        """Process names (process_name metadata events) and the profiler's own settings.

        Only the top-level keys the PyTorch profiler itself writes (PROFILER_SETTINGS)
        are shown; user metadata (`metadata`, add_metadata_json values), which may hold
        environment variables, command lines or host names, never is. Nothing is redacted
        because nothing free-form is shown."""
        names = process_names(self.c.metadata)
        procs = self.c.procs.values_list()
        by_pid = {int(self._pid_of_proc[i]): names.get(v) for i, v in enumerate(procs)}
        return {
            "processes": [{"pid": p, "name": by_pid.get(p)} for p in pids],
            "settings": profiler_settings(self.top),
            "environment": [],
            "redacted_values": 0,
        }

    def clock_origin(self) -> ClockOrigin:
        """Wall-clock time of timestamp 0: baseTimeNanoseconds (PyTorch 2.x writes times
        relative to it), or 0 when the timestamps are epoch times themselves (older traces
        write absolute epoch microseconds)."""
        first = self._first_time()
        if first is None:
            raise Unavailable("the trace has no timed events")
        if first >= EPOCH_NS_MIN:
            return ClockOrigin(0, "absolute epoch timestamps")
        base = base_time_ns(self.top)
        if base is not None:
            return ClockOrigin(base, "baseTimeNanoseconds")
        raise Unavailable(
            "the trace has no baseTimeNanoseconds and its timestamps are not epoch times"
        )

    def _first_time(self) -> int | None:
        starts = [_arr(self.c.tables[k].start) for k in (kc.KERNEL, kc.RUNTIME, kc.OP)]
        starts = [s[s >= 0] for s in starts]
        present = [int(s.min()) for s in starts if len(s)]
        return min(present) if present else None

    def kernel_pid_note(self, pids: np.ndarray) -> str | None:
        bad = int((pids < 0).sum())
        if not bad:
            return None
        return (
            f"{bad:,} kernels have no launch call in the trace, and the trace has "
            f"{len(self._host_pids())} host processes, so they belong to none of them (pid -1)"
        )


def _match_pairs(keys: np.ndarray, values: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per query (a[i], b[i]): values[j] where keys[:, j] == (a[i], b[i]) (distinct keys),
    else -1. One joint sort: each query lands right after its equal key, if any."""
    n_keys = keys.shape[1]
    if not n_keys or not len(a):
        return np.full(len(a), -1, np.int64)
    ka = np.concatenate([keys[0], a])
    kb = np.concatenate([keys[1], b])
    is_query = np.concatenate([np.zeros(n_keys, np.int64), np.ones(len(a), np.int64)])
    order = np.lexsort((is_query, kb, ka))
    key_pos = np.where(is_query[order] == 0, np.arange(len(order)), -1)
    last_key = np.maximum.accumulate(key_pos)  # per sorted slot: the last key at or before it
    slot = np.empty(len(order), np.int64)
    slot[order] = np.arange(len(order))
    q = slot[n_keys:]
    k = last_key[q]
    kk = order[np.maximum(k, 0)]
    hit = (k >= 0) & (ka[kk] == a) & (kb[kk] == b)
    return np.where(hit, values[np.minimum(kk, n_keys - 1)], -1).astype(np.int64)


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


# A traceEvents array of only these is not a profiler trace (e.g. a Chrome trace of
# something else): at least one event must be a GPU or CUDA/operator event.
PROFILER_CATEGORIES_HINT = "kernel, cuda_runtime, cpu_op, user_annotation ..."
# Top-level keys only the PyTorch profiler writes: with one of them, a trace without events
# is an empty capture (reported as such), not some other JSON file.
KINETO_KEYS = frozenset({"schemaVersion", "deviceProperties", "baseTimeNanoseconds", "distributedInfo",
                         "cupti_version", "cuda_runtime_version", "roctracer_version"})


def open_kineto(path: Path, kernel_name: str = "demangled") -> KinetoTraceData:
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    top, collected = prefetch.take(path) or read_events(path)
    if not any(len(t) for t in collected.tables) and not KINETO_KEYS & set(top):
        seen = sum(collected.categories.values())
        raise InputError(
            f"{path}: {NOT_A_TRACE} ({seen} events, none of them a PyTorch profiler "
            f"category such as {PROFILER_CATEGORIES_HINT})"
        )
    data = KinetoTraceData(collected, top, kernel_name=kernel_name)
    if kernel_name != "demangled":
        data.warnings.append(
            f"--kernel-name {kernel_name}: PyTorch profiler traces hold one (demangled) kernel "
            "name; it is used as it is"
        )
    return data


def describe_trace(path: Path) -> str:
    """--print-schema for a PyTorch profiler trace: its event categories and their counts."""
    data = open_kineto(path)
    counts = data.table_counts()
    return "\n".join([f"{path}: {data.format_name}", *(f"  {c}: {n} events" for c, n in counts.items())])


# Top-level keys reported as the trace's version facts (all optional).
VERSION_KEYS = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
                "hip_runtime_version", "roctracer_version", "rocm_version", "displayTimeUnit",
                "baseTimeNanoseconds")
# Top-level keys the PyTorch profiler itself writes, shown with --include-capture-info. All
# other top-level keys (user metadata, trace names that are paths) are never shown.
PROFILER_SETTINGS = (*VERSION_KEYS, "record_shapes", "profile_memory", "with_stack", "with_flops",
                     "with_modules")
MAX_SETTING_CHARS = 100
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
MAX_LITERAL_CHARS = 1 << 20


def profiler_step(name: str) -> int:
    """N of a 'ProfilerStep#N' range name, else -1."""
    m = _STEP.match(name or "")
    return int(m.group(1)) if m and len(m.group(1)) < 18 else -1


def _literal(value: Any) -> Any:
    """A JSON value, or the Python literal a string holds (None when it holds none)."""
    if isinstance(value, str):
        if len(value) > MAX_LITERAL_CHARS:
            return None
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return value


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


ROCM_KEYS = (
    "hip_runtime_version", "roctracer_version", "rocm_version", "hip_driver_version", "rocprofiler-sdk_version",
)
# AMD GPUs report their gfx version as the compute capability: 9.4 is gfx940-942 (CDNA3).
AMD_SERIES = {"9.0": "gfx90x (MI100/MI200 series)", "9.4": "gfx94x (MI300 series)", "9.5": "gfx950 (MI350 series)"}


def vendor(top: JsonObject, props: list[Any]) -> str | None:
    """amd for a ROCm trace (HIP or roctracer version keys, 64-wide wavefronts, an AMD name),
    nvidia for a CUDA one, else None."""
    if any(k in top for k in ROCM_KEYS):
        return "amd"
    for p in props:
        if isinstance(p, dict) and (_int(p.get("warpSize")) == 64 or "AMD" in str(p.get("name") or "")):
            return "amd"
    if any(k in top for k in ("cuda_runtime_version", "cuda_driver_version", "cupti_version")):
        return "nvidia"
    return None


# AMD Instinct models by what deviceProperties records when ROCm leaves the name empty:
# (gfx major.minor, compute units, memory in GiB) -> the product; the memory matches within
# AMD_MEMORY_TOLERANCE (ROCm reports a little less than the product's HBM). Each signature is
# one product: the MI300X and MI325X differ in memory, the MI300A in compute units.
AMD_MODELS = (
    ("9.4", 304, 192, "AMD Instinct MI300X"),
    ("9.4", 304, 256, "AMD Instinct MI325X"),
    ("9.4", 228, 128, "AMD Instinct MI300A"),
)
AMD_MEMORY_TOLERANCE = 0.04


def _amd_name(cc: str | None, sms: int | None, mem: int | None) -> str | None:
    """A name for an AMD GPU whose deviceProperties name is empty (ROCm leaves it empty where
    it cannot map the device id to a marketing name): the product when its gfx version,
    compute units and memory are one product's (AMD_MODELS), else a description of its gfx
    series, compute units and memory, never a guessed model (peak figures stay unknown)."""
    gib = mem / 2**30 if mem else 0.0
    for model_cc, cus, memory, product in AMD_MODELS:
        if (cc, sms) == (model_cc, cus) and abs(gib - memory) <= AMD_MEMORY_TOLERANCE * memory:
            return product
    series = AMD_SERIES.get(cc or "")
    if series is None and cc is None:
        return None
    parts = [p for p in (f"{sms} CUs" if sms else None,
                         f"{mem / 2**30:.0f} GiB" if mem else None) if p]
    what = series or (f"gfx{cc.replace('.', '')}x" if cc else "of unknown series")
    return f"AMD GPU {what}" + (f", {', '.join(parts)}" if parts else "") + " (name not recorded)"


def gpus_of(top: JsonObject) -> list[GpuInfo]:
    """deviceProperties -> GpuInfo per device id (first entry wins). An empty name is None,
    except on an AMD GPU, which gets a descriptive name from its gfx version, compute units
    and memory (_amd_name)."""
    props = _literal(top.get("deviceProperties"))
    if not isinstance(props, list):
        return []
    kind = vendor(top, props)
    out: dict[int, GpuInfo] = {}
    for p in props:
        if not isinstance(p, dict):
            continue
        dev = _int(p.get("id"))
        if dev is None or dev < 0 or dev in out:
            continue
        name = p.get("name")
        major, minor = _int(p.get("computeMajor")), _int(p.get("computeMinor"))
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        sms, mem = _int(p.get("numSms")), _int(p.get("totalGlobalMem"))
        text = name.strip() or None if isinstance(name, str) else None
        if text is None and kind == "amd":
            text = _amd_name(cc, sms, mem)
        out[dev] = GpuInfo(
            device_id=dev,
            name=text,
            sm_count=sms,
            total_memory_bytes=mem,
            compute_capability=cc,
            vendor=kind,
        )
    return [out[d] for d in sorted(out)]


# Fields of the trace's own metadata (top level, or inside a `metadata` object, up to
# META_DEPTH levels down) that name the command line or the model. Read only to name the
# program and the model (analysis/program.py); nothing else of user metadata is used.
COMMAND_KEYS = frozenset({"command", "cmd", "cmdline", "command_line", "commandline", "argv", "sys_argv"})
MODEL_KEYS = frozenset({"model", "model_name", "model_id", "repo_id", "model_path", "model_name_or_path",
                        "pretrained_model_name_or_path", "hf_model", "model_repo"})
META_DEPTH = 3
# The PyTorch profiler's settings that slow the host down (with_stack records every Python
# call, profile_memory every allocation, record_shapes every operator's input shapes).
OVERHEAD_SETTINGS = ("with_stack", "profile_memory", "record_shapes", "with_modules", "with_flops")
# Fields that say the events were sampled, filtered or truncated, when true (or a rate below 1).
SAMPLED_KEYS = frozenset({"sampled", "sampling", "sample_rate", "sampling_rate", "trace_sampling",
                          "event_sampling", "truncated", "filtered", "events_dropped", "dropped_events"})


def _fields(obj: Any, keys: frozenset[str], depth: int = 0) -> list[tuple[str, Any]]:
    """(key, value) of `keys` in a metadata object, breadth first, META_DEPTH levels deep."""
    if not isinstance(obj, dict) or depth > META_DEPTH:
        return []
    out = [(k, v) for k, v in obj.items() if isinstance(k, str) and k.lower() in keys]
    for v in obj.values():
        if isinstance(v, dict):
            out.extend(_fields(v, keys, depth + 1))
    return out


def _metadata(top: JsonObject) -> list[JsonObject]:
    meta = _literal(top.get("metadata")) if isinstance(top.get("metadata"), str) else top.get("metadata")
    return [top, meta] if isinstance(meta, dict) else [top]


def command_lines_of(top: JsonObject) -> list[CommandLine]:
    """The command line and the model the trace's metadata names (module constants); [] when
    none does."""
    argv: tuple[str, ...] = ()
    model = None
    for obj in _metadata(top):
        for _, value in _fields(obj, COMMAND_KEYS):
            if not argv and isinstance(value, str) and value.strip():
                argv = (value[:MAX_SETTING_CHARS * 40],)
            elif not argv and isinstance(value, list) and value and all(isinstance(x, str) for x in value):
                argv = tuple(x[:MAX_SETTING_CHARS * 40] for x in value[:200])
        for _, value in _fields(obj, MODEL_KEYS):
            if model is None and isinstance(value, str) and value.strip():
                model = value.strip()[:MAX_SETTING_CHARS * 4]
    if not argv and model is None:
        return []
    return [CommandLine(None, argv, "metadata", model)]


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return 0 < value < 1 if isinstance(value, float) else value != 0
    return isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on")


def profiler_options_of(top: JsonObject) -> ProfilerOptions:
    settings = {key: _truthy(top[key]) for key in OVERHEAD_SETTINGS if key in top}
    sampled = tuple(sorted({k for obj in _metadata(top) for k, v in _fields(obj, SAMPLED_KEYS)
                            if _truthy(v) or (isinstance(v, float) and 0 < v < 1)}))
    return ProfilerOptions(settings, sampled)


def distributed_of(top: JsonObject) -> Distributed | None:
    """distributedInfo: rank, world size and backend (None when the trace has none)."""
    info = _literal(top.get("distributedInfo"))
    if not isinstance(info, dict):
        return None
    backend = info.get("backend")
    return {
        "rank": _int(info.get("rank")),
        "world_size": _int(info.get("world_size")),
        "backend": backend if isinstance(backend, str) else None,
    }


def format_info(top: JsonObject) -> dict[str, int | str]:
    """The version fields the trace has, as written (ints or text; others dropped)."""
    out: dict[str, int | str] = {}
    for key in VERSION_KEYS:
        value = top.get(key)
        if isinstance(value, bool) or not isinstance(value, int | str):
            continue
        out[key] = value if isinstance(value, int) or len(value) <= 100 else value[:100]
    return out


def profiler_settings(top: JsonObject) -> list[Setting]:
    """PROFILER_SETTINGS the trace has, as name/value text (numbers and short text only)."""
    out: list[Setting] = []
    for key in PROFILER_SETTINGS:
        value = top.get(key)
        if isinstance(value, bool | int):
            out.append({"name": key, "value": str(value).lower() if isinstance(value, bool) else str(value)})
        elif isinstance(value, str) and value.strip():
            out.append({"name": key, "value": value[:MAX_SETTING_CHARS]})
    return out


def base_time_ns(top: JsonObject) -> int | None:
    """baseTimeNanoseconds: the epoch time in ns that timestamps count from (None when
    absent or not a positive integer)."""
    value = _int(top.get("baseTimeNanoseconds"))
    return value if value is not None and 0 < value < 1 << 62 else None


def process_names(events: list[JsonObject]) -> dict[int | str, str]:
    """pid value -> name from `process_name` metadata events."""
    out: dict[int | str, str] = {}
    for e in events:
        args = e.get("args")
        name = args.get("name") if isinstance(args, dict) else None
        if e.get("name") == "process_name" and isinstance(name, str):
            pid = e.get("pid")
            if isinstance(pid, int | str):
                out.setdefault(pid, name)
    return out


def bad_event_warnings(bad: Counter[str]) -> list[str]:
    return [
        f"{kind}: {n} events ignored (no usable ts, a dur that is not a number, a negative dur, a time "
        "beyond 2^62 ns, or an id or size beyond 64 bits)"
        for kind, n in sorted(bad.items())
    ]


def limitations_of(collected: Collected, kernels: int) -> list[str]:
    """What a PyTorch profiler trace cannot tell, as report limitations (docs/kineto.md);
    `kernels`: how many kernel events it holds."""
    out = [
        f"Read from a {TraceFormat.KINETO.label}: NVTX-based sections use its host ranges "
        "(user_annotation and cpu_op events) as NVTX ranges.",
        "PyTorch profiler traces record no CUDA graph trace mode, no GPU clocks or memory "
        "bandwidth, and no profiler diagnostics; copy source and destination devices are "
        "unknown.",
    ]
    if kernels and not len(collected.tables[RUNTIME]):
        out.append("The trace has kernels but no cuda_runtime/cuda_driver events: launches are not measured.")
    return out
