"""Operator attribution shared by the operators metric and later readers (FLOP estimates).

Operators are PyTorch profiler `cpu_op` events (aten::* and user ops). They nest on their
thread; an operator's parent is the innermost operator of the same thread that encloses it.

A kernel belongs to the innermost operator enclosing its launch call on the launching
thread (the call joins the kernel on (process, correlation id)). A kernel with no launch
call in the trace falls back to its External id: Kineto stamps every GPU event with the
External id of the innermost operator or annotation active at launch. The operator must have
started at or before the kernel, in the kernel's process; older traces number GPU events'
External ids apart from the operators', where an equal id is a coincidence. Launch calls are
placed the same way, so per operator the CPU time of its launch calls and the queueing
delay of its kernels (launch call start -> kernel start) are known.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nsys_llm_explainer.analysis import nvtx_tree
from nsys_llm_explainer.analysis.groups import distinct, group_sum
from nsys_llm_explainer.analysis.join import kernel_launch_index
from nsys_llm_explainer.analysis.launch_pairs import launch_api_mask
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import TraceData, Unavailable

CACHE_KEY = "operator_attribution"


@dataclass(frozen=True)
class OperatorAttribution:
    ops: Columns  # data.operators(), rows as loaded
    index: nvtx_tree.RangeIndex  # operators sorted per thread (order: sorted pos -> row)
    self_ns: np.ndarray  # per operator row: duration minus its child operators' durations
    kernel_op: np.ndarray  # per kernel: operator row, or -1
    kernel_via_ext: np.ndarray  # per kernel: True when placed by External id (no launch call)
    launch_call: np.ndarray  # per kernel: runtime row of its launch call, or -1
    call_op: np.ndarray  # per launch-API runtime row in `calls`: operator row, or -1
    calls: np.ndarray  # runtime rows of launch API calls


def _rows(index: nvtx_tree.RangeIndex, pos: np.ndarray) -> np.ndarray:
    return np.where(pos >= 0, index.order[np.maximum(pos, 0)], -1)


def _self_time(ops: Columns, index: nvtx_tree.RangeIndex) -> np.ndarray:
    """Per operator row: own duration minus the durations of its direct child operators
    (clipped at 0: children of damaged traces may overlap)."""
    dur = ops.end - ops.start
    sorted_dur = dur[index.order]
    has_parent = index.parent >= 0
    child = group_sum(sorted_dur[has_parent], index.parent[has_parent], len(index.order))
    own = np.zeros(len(ops), dtype=np.int64)
    own[index.order] = np.maximum(sorted_dur - child, 0)
    return own


def _by_external_id(ops: Columns, ext: np.ndarray, start: np.ndarray, pid: np.ndarray) -> np.ndarray:
    """Per kernel: the operator row with the kernel's External id that started last at or
    before the kernel did, in the kernel's process when that is known (pid >= 0); -1 when
    none. Older traces number GPU events' External ids apart from the operators', so an
    equal id alone is no evidence: an operator that started after the kernel, or in another
    process, did not launch it."""
    out = np.full(len(ext), -1, dtype=np.int64)
    has = np.flatnonzero(ops.ext >= 0)
    if not len(has) or not len(ext):
        return out
    n = len(has)
    key = np.concatenate([ops.ext[has], ext])
    when = np.concatenate([ops.start[has], start])
    is_kernel = np.concatenate([np.zeros(n, np.int64), np.ones(len(ext), np.int64)])
    order = np.lexsort((is_kernel, when, key))  # an operator sorts before a kernel of equal start
    op_slot = np.where(is_kernel[order] == 0, np.arange(len(order)), -1)
    last_op = np.maximum.accumulate(op_slot)  # per sorted slot: the last operator at or before it
    slot = np.empty(len(order), np.int64)
    slot[order] = np.arange(len(order))
    found = last_op[slot[n:]]
    cand = order[np.maximum(found, 0)]  # index into the concatenation: < n for operators
    ok = (found >= 0) & (ext >= 0) & (key[cand] == ext)
    rows = has[np.minimum(cand, n - 1)]
    ok &= (pid < 0) | (ops.pid[rows] == pid)
    out[ok] = rows[ok]
    return out


def operator_attribution(data: TraceData) -> OperatorAttribution:
    """Computed once per trace (cached): kernels, launch calls and self times per operator."""

    def build() -> OperatorAttribution:
        ops = data.operators()
        index = nvtx_tree.build(ops)
        k = data.kernels()
        try:
            rt = data.runtime()
            launch = kernel_launch_index(data)
            api_names = data.runtime_api_names()
        except Unavailable:
            rt, launch, api_names = None, np.full(len(k), -1, np.int64), []
        kernel_op = np.full(len(k), -1, dtype=np.int64)
        calls = np.empty(0, np.int64)
        call_op = np.empty(0, np.int64)
        if rt is not None and len(rt):
            hit = np.flatnonzero(launch >= 0)
            c = launch[hit]
            kernel_op[hit] = _rows(index, nvtx_tree.innermost(index, rt.tkey[c], rt.start[c], rt.end[c]))
            calls = np.flatnonzero(launch_api_mask(api_names)[rt.api]) if len(api_names) else calls
            call_op = _rows(index, nvtx_tree.innermost(index, rt.tkey[calls], rt.start[calls], rt.end[calls]))
        via_ext = (launch < 0) & ("ext" in k)
        if via_ext.any():
            kernel_op[via_ext] = _by_external_id(ops, k.ext[via_ext], k.start[via_ext], k.pid[via_ext])
        via_ext &= kernel_op >= 0
        return OperatorAttribution(ops, index, _self_time(ops, index), kernel_op, via_ext, launch,
                                   call_op, calls)

    return data.cached(CACHE_KEY, build)


def inclusive_per_name(att: OperatorAttribution, own: np.ndarray, n_names: int) -> np.ndarray:
    """Per operator name: `own` (per operator row) summed over every operator lying within
    an operator of that name on its thread, each row counted once per name even when the
    name nests in itself (aten::linear around aten::linear)."""
    own_sorted = own[att.index.order]
    rr, cc = nvtx_tree.containers(att.index, np.flatnonzero(own_sorted > 0))
    name_sorted = att.ops.name[att.index.order]
    width = max(n_names, 1)
    key = distinct(rr * width + name_sorted[cc])
    return group_sum(own_sorted[key // width], key % width, n_names)
