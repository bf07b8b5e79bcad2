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

The operators metric's secondary views: operator -> kernel pairs, input shapes, steps,
phases and Python call sites (operators.py holds the per-operator table)."""

from __future__ import annotations

import json
from typing import TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import distinct, group_codes, group_sum
from nsys_llm_explainer.analysis.join import kernel_launch_index, launch_api_mask
from nsys_llm_explainer.analysis.phase_scope import phase_scope
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonValue
from nsys_llm_explainer.trace.columns import Columns
from nsys_llm_explainer.trace.data import TraceData, Unavailable

CACHE_KEY = "operator_attribution"


# The rows of report.json metrics.operators (docs/metrics/operators.md) built here.
class ShapeRow(TypedDict):
    """One input shape of an operator (top_shapes)."""

    input_dims: JsonValue  # as the trace wrote it (None: not recorded)
    input_types: JsonValue
    calls: int
    cpu_inclusive_ns: int
    kernel_ns: int


class OperatorTime(TypedDict):
    name: str
    kernel_ns: int


class StepRow(TypedDict):
    """One ProfilerStep#N (steps)."""

    step: int
    pid: int
    start_ns: int
    end_ns: int
    operator_calls: int
    cpu_inclusive_ns: int
    kernel_ns: int
    top_operators: list[OperatorTime]


class PhaseRow(TypedDict):
    """One phase of a phase map or --step-range (phases)."""

    phase: str
    kernel_ns: int
    operators: list[OperatorTime]


class CallSite(TypedDict):
    frame: str
    calls: int
    kernel_ns: int


class OperatorCallSites(TypedDict):
    """The Python frames around one top operator's calls (call_sites)."""

    operator: str
    sites: list[CallSite]


@frozen
class OperatorAttribution:
    ops: Columns  # data.operators(), rows as loaded
    index: nvtx.RangeIndex  # operators sorted per thread (order: sorted pos -> row)
    self_ns: np.ndarray  # per operator row: duration minus its child operators' durations
    kernel_op: np.ndarray  # per kernel: operator row, or -1
    kernel_via_ext: np.ndarray  # per kernel: True when placed by External id (no launch call)
    launch_call: np.ndarray  # per kernel: runtime row of its launch call, or -1
    call_op: np.ndarray  # per launch-API runtime row in `calls`: operator row, or -1
    calls: np.ndarray  # runtime rows of launch API calls


def _rows(index: nvtx.RangeIndex, pos: np.ndarray) -> np.ndarray:
    return np.where(pos >= 0, index.order[np.maximum(pos, 0)], -1)


def _self_time(ops: Columns, index: nvtx.RangeIndex) -> np.ndarray:
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
        index = nvtx.build(ops)
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
            kernel_op[hit] = _rows(index, nvtx.innermost(index, rt.tkey[c], rt.start[c], rt.end[c]))
            calls = np.flatnonzero(launch_api_mask(api_names)[rt.api]) if len(api_names) else calls
            call_op = _rows(index, nvtx.innermost(index, rt.tkey[calls], rt.start[calls], rt.end[calls]))
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
    rr, cc = nvtx.containers(att.index, np.flatnonzero(own_sorted > 0))
    name_sorted = att.ops.name[att.index.order]
    width = max(n_names, 1)
    key = distinct(rr * width + name_sorted[cc])
    return group_sum(own_sorted[key // width], key % width, n_names)


NO_OPERATOR = "(no operator)"
TOP_PER_STEP = 3
TOP_PER_PHASE = 10
CALL_SITE_OPERATORS = 10  # operators (by kernel time) whose call sites are listed
CALL_SITES_EACH = 3


def first_kernel_per_call(launch_call: np.ndarray, kstart: np.ndarray) -> np.ndarray:
    """Per kernel: True for the earliest kernel of its launch call (graph launches start
    many; only the first measures the launch delay)."""
    first = np.zeros(len(launch_call), dtype=bool)
    has = np.flatnonzero(launch_call >= 0)
    if len(has):
        order = has[np.lexsort((kstart[has], launch_call[has]))]
        lead = np.ones(len(order), dtype=bool)
        lead[1:] = launch_call[order][1:] != launch_call[order][:-1]
        first[order[lead]] = True
    return first


def distinct_shapes(shape: np.ndarray, codes: np.ndarray, g: int) -> np.ndarray:
    """Per operator code: how many distinct input shapes its calls had (0: not recorded)."""
    has = shape >= 0
    if not has.any():
        return np.zeros(g, dtype=np.int64)
    _, (pc, _) = group_codes(codes[has], shape[has])
    return np.bincount(pc, minlength=g).astype(np.int64)


def _names(frame: pd.DataFrame) -> dict[int, str]:
    return dict(zip(frame["code"].tolist(), frame["name"].tolist(), strict=True))


def operator_kernels(data: TraceData, att: OperatorAttribution, frame: pd.DataFrame) -> pd.DataFrame:
    """operator -> kernel -> kernel count and time (kernels with no operator under NO_OPERATOR)."""
    k = data.kernels()
    codes, _ = group_codes(att.ops.name)
    kop = att.kernel_op
    kcode = np.where(kop >= 0, codes[np.maximum(kop, 0)], -1)
    pair, (pc, pk) = group_codes(kcode, k.name_id)
    n = len(pc)
    kns = group_sum(k.dur, pair, n)
    names = _names(frame)
    knames = data.kernel_names(pk)
    per_op = pd.Series(kns).groupby(pc).transform("sum").to_numpy()
    out = pd.DataFrame({
        "operator": [names.get(int(c), NO_OPERATOR) for c in pc],
        "kernel": [knames.get(int(i), "(unnamed kernel)") for i in pk],
        "kernel_count": np.bincount(pair, minlength=n),
        "kernel_ns": kns,
        "pct_of_operator_kernel_ns": np.round(100.0 * kns / np.maximum(per_op, 1), 2),
    })
    return out.sort_values(["kernel_ns", "operator", "kernel"], ascending=[False, True, True],
                           kind="stable").reset_index(drop=True)


def shape_table(data: TraceData, att: OperatorAttribution, codes: np.ndarray, frame: pd.DataFrame) -> pd.DataFrame:
    """Per (operator, distinct input shapes/types): calls, CPU inclusive time, own kernel time.

    input_dims / input_types are the JSON text of the trace's `Input Dims` / `Input type`."""
    ops = att.ops
    has = np.flatnonzero(ops.shape >= 0)
    cols = ("operator", "input_dims", "input_types", "calls", "cpu_inclusive_ns", "kernel_ns")
    if not len(has):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    k = data.kernels()
    hit = att.kernel_op >= 0
    own = group_sum(k.dur[hit], att.kernel_op[hit], len(ops))
    pair, (pc, ps) = group_codes(codes[has], ops.shape[has])
    n = len(pc)
    shapes = data.operator_shapes()
    names = _names(frame)
    out = pd.DataFrame({
        "operator": [names[int(c)] for c in pc],
        "input_dims": [shapes[int(s)][0] for s in ps],
        "input_types": [shapes[int(s)][1] for s in ps],
        "calls": np.bincount(pair, minlength=n),
        "cpu_inclusive_ns": group_sum((ops.end - ops.start)[has], pair, n),
        "kernel_ns": group_sum(own[has], pair, n),
    })
    return out.sort_values(["kernel_ns", "cpu_inclusive_ns", "operator"], ascending=[False, False, True],
                           kind="stable").reset_index(drop=True)


def shapes_by_operator(shapes: pd.DataFrame, limit: int) -> dict[str, list[ShapeRow]]:
    """Operator -> the first `limit` rows of the shape table (its order) as records, in one
    pass over the table."""
    out: dict[str, list[ShapeRow]] = {}
    if not len(shapes):
        return out
    cols = [shapes[c].tolist() for c in ("operator", "input_dims", "input_types", "calls", "cpu_inclusive_ns",
                                          "kernel_ns")]
    for op, dims, types, calls, cpu, kns in zip(*cols, strict=True):
        rows = out.setdefault(op, [])
        if len(rows) < limit:
            rows.append({"input_dims": _json(dims), "input_types": _json(types), "calls": int(calls),
                         "cpu_inclusive_ns": int(cpu), "kernel_ns": int(kns)})
    return out


def _json(text: str) -> JsonValue:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def per_step(data: TraceData, att: OperatorAttribution, codes: np.ndarray, frame: pd.DataFrame) -> list[StepRow]:
    """Per ProfilerStep#N: operator calls starting in it (any thread of its process), their
    CPU time, the kernel time they launched, and the top operators by that time."""
    try:
        steps = data.step_ranges()
    except Unavailable:
        return []
    if not len(steps):
        return []
    ops, k = att.ops, data.kernels()
    order = np.lexsort((steps.start, steps.pid))
    step_of = np.full(len(ops), -1, dtype=np.int64)
    for pid in np.unique(steps.pid).tolist():
        idx = order[steps.pid[order] == pid]
        mine = np.flatnonzero(ops.pid == pid)
        pos = np.searchsorted(steps.start[idx], ops.start[mine], "right") - 1
        ok = pos >= 0
        inside = np.zeros(len(mine), dtype=bool)
        inside[ok] = ops.start[mine[ok]] < steps.end[idx[pos[ok]]]
        step_of[mine[inside]] = idx[pos[inside]]
    hit = att.kernel_op >= 0
    kstep = np.where(hit, step_of[np.maximum(att.kernel_op, 0)], -1)
    names = _names(frame)
    top_level = att.index.parent[_pos(att)] < 0
    # Per step in one pass each (not a comparison of every call and kernel per step).
    n = len(steps)
    in_step = step_of >= 0
    calls = np.bincount(step_of[in_step], minlength=n)
    top = in_step & top_level
    cpu = group_sum((ops.end - ops.start)[top], step_of[top], n)
    dur = k.dur
    k_in = np.flatnonzero(kstep >= 0)
    k_in = k_in[np.argsort(kstep[k_in], kind="stable")]  # kernels grouped by step, in row order
    bounds = np.searchsorted(kstep[k_in], np.arange(n + 1))
    out: list[StepRow] = []
    for s in np.argsort(steps.start, kind="stable").tolist():
        rows = k_in[bounds[s] : bounds[s + 1]]
        by_op = _top_sums(codes[att.kernel_op[rows]], dur[rows], TOP_PER_STEP)
        out.append({
            "step": int(steps.step[s]), "pid": int(steps.pid[s]),
            "start_ns": int(steps.start[s]), "end_ns": int(steps.end[s]),
            "operator_calls": int(calls[s]),
            "cpu_inclusive_ns": int(cpu[s]),
            "kernel_ns": int(dur[rows].sum()),
            "top_operators": [{"name": names[c], "kernel_ns": v} for c, v in by_op],
        })
    return out


def _top_sums(keys: np.ndarray, values: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """(key, summed value) of the `limit` keys with the largest sums, largest first (ties:
    smaller key first)."""
    if not len(keys):
        return []
    uniq, inverse = np.unique(keys, return_inverse=True)
    sums = np.bincount(inverse, weights=values, minlength=len(uniq)).astype(np.int64)
    order = np.lexsort((uniq, -sums))[:limit]
    return [(int(uniq[i]), int(sums[i])) for i in order]


def _pos(att: OperatorAttribution) -> np.ndarray:
    """Per operator row: its sorted position in att.index."""
    pos = np.empty(len(att.index.order), dtype=np.int64)
    pos[att.index.order] = np.arange(len(att.index.order))
    return pos


def per_phase(ctx: Context, att: OperatorAttribution, frame: pd.DataFrame) -> list[PhaseRow]:
    """With a phase map or --step-range: per phase, the top operators by kernel time."""
    if not ctx.options.phase_map and not ctx.options.step_range:
        return []
    scope = phase_scope(ctx)
    if scope is None:
        return []
    k = ctx.data.kernels()
    kphase = scope.kernel_phase()
    codes, _ = group_codes(att.ops.name)
    names = _names(frame)
    out: list[PhaseRow] = []
    for i, phase in enumerate(scope.phases):
        sel = (kphase == i) & (att.kernel_op >= 0)
        by_op = _top_sums(codes[att.kernel_op[sel]], k.dur[sel], TOP_PER_PHASE)
        out.append({
            "phase": phase, "kernel_ns": int(k.dur[kphase == i].sum()),
            "operators": [{"name": names[c], "kernel_ns": v} for c, v in by_op],
        })
    return out


def call_sites(
    data: TraceData, att: OperatorAttribution, codes: np.ndarray, frame: pd.DataFrame
) -> tuple[list[OperatorCallSites], str | None]:
    """For the top operators: the innermost Python frames (python_function events that are
    not built-ins) around their calls, by calls and own kernel time."""
    try:
        py = data.python_functions()
    except Unavailable as exc:
        return [], exc.reason
    ops, k = att.ops, data.kernels()
    names = data.operator_names()
    index = nvtx.build(py)
    builtin = np.array([n.startswith("<") for n in names] or [False], dtype=bool)
    hit = att.kernel_op >= 0
    own = group_sum(k.dur[hit], att.kernel_op[hit], len(ops))
    op_names = _names(frame)
    out: list[OperatorCallSites] = []
    for code in frame["code"].head(CALL_SITE_OPERATORS).tolist():
        rows = np.flatnonzero(codes == code)
        pos = nvtx.innermost(index, ops.tkey[rows], ops.start[rows], ops.end[rows])
        for _ in range(64):  # walk out of built-ins (<built-in method ...>) to a source line
            row = np.where(pos >= 0, index.order[np.maximum(pos, 0)], -1)
            up = (row >= 0) & builtin[py.name[np.maximum(row, 0)]]
            if not up.any():
                break
            pos = np.where(up, index.parent[np.maximum(pos, 0)], pos)
        row = np.where(pos >= 0, index.order[np.maximum(pos, 0)], -1)
        found = row >= 0
        if not found.any():
            continue
        # Per frame name: calls and own kernel time; most kernel time first, then most calls,
        # then by name.
        frame_names = [names[int(i)] for i in py.name[row[found]]]
        uniq, inverse = np.unique(np.array(frame_names, dtype=object), return_inverse=True)
        calls = np.bincount(inverse, minlength=len(uniq))
        kns = np.bincount(inverse, weights=own[rows[found]], minlength=len(uniq)).astype(np.int64)
        order = np.lexsort((np.arange(len(uniq)), -calls, -kns))[:CALL_SITES_EACH]
        out.append({
            "operator": str(op_names[int(code)]),
            "sites": [{"frame": str(uniq[i]), "calls": int(calls[i]), "kernel_ns": int(kns[i])} for i in order],
        })
    return out, None
