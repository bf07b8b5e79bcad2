"""Operator calls with their shapes and cost (FLOPs, bytes), from whichever source a trace has.

- PyTorch profiler traces: the operators (cpu_op events) with record_shapes' Input Dims and
  Input type (and Concrete Inputs, PyTorch 2.1+); kernels belong to the innermost operator
  around their launch (analysis/operators.py).
- Nsight Systems exports: NVTX ranges PyTorch names `aten::addmm, seq = 12, sizes = [...]`
  (emit_nvtx(record_shapes=True), nsys --pytorch=autograd-shapes-nvtx); kernels belong to the
  innermost range around their launch call (nvtx_attribution.py). NVTX names carry no dtype:
  each range gets the one its own longest kernel's name states (compute/dtypes.py),
  else the one most of the trace's kernel time states, always marked assumed.

A concatenation of a tensor list (`aten::cat`) records no dtype for the list: its element
size is the one its kernel states (`CatArrayBatchedCopy<OpaqueType<4u>, ...>` is 4 bytes), not
an assumed dtype's.

Each distinct (operator, shapes[, values], dtype) is costed once (compute/opcost.py) and the
result mapped to calls by code, so the work grows with the distinct shapes, not the calls.
Only operators with a formula are parsed (opcost.has_formula); views and unknown ops are not.

What compute_efficiency and model_utilization tell the user to capture or pass, keyed to
the workload (metrics/workload.py), so that a CUDA program outside PyTorch is not told about
Hugging Face configs or PyTorch's NVTX options.

- PyTorch and LLM workloads (and every PyTorch profiler trace): the PyTorch capture option
  that records operator shapes; MFU from --model config.json (LLMs) or
  --model-flops-per-token with --tokens-per-step.
- TensorRT engines, plain CUDA programs and unknown workloads: their traces carry no operator
  shapes, so per-kernel FLOPs and bytes come from Nsight Compute (ncu_plan.sh); MFU needs the
  FLOPs a step must compute, passed as --model-flops-per-token F with --tokens-per-step 1."""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import field

import numpy as np

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.groups import group_codes, group_sum
from nsys_llm_explainer.analysis.join import kernel_attribution
from nsys_llm_explainer.analysis.nvtx import normalized_names
from nsys_llm_explainer.analysis.operators import operator_attribution
from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.cost import OpCost, short_name
from nsys_llm_explainer.compute.dtypes import dtype_from_kernel
from nsys_llm_explainer.compute.opcost import CONCAT, has_formula, op_cost
from nsys_llm_explainer.compute.shapes import OpShapes, Uncounted, from_kineto, shapes_from_nvtx
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject, TraceFormat
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

CACHE_KEY = "compute_instances"
NVTX_CAPTURE = (
    "capture with `nsys profile --pytorch=autograd-shapes-nvtx` (or "
    "`torch.autograd.profiler.emit_nvtx(record_shapes=True)`)"
)
KINETO_CAPTURE = "profile with `torch.profiler.profile(record_shapes=True)`"
SIZES = "sizes = ["
DEFAULT_DTYPE = "bf16"
OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")
# A dtype of each element size, for the bytes of a copy whose kernel states only the size.
OPAQUE_DTYPE = {1: "uint8", 2: "bf16", 4: "fp32", 8: "int64"}


@frozen
class Embedding:
    """An embedding call's table rows and the sizes of its index tensor."""

    table_rows: int
    indices: tuple[int, ...]


@frozen
class Instances:
    """Operator calls in range-index order (analysis/nvtx.py) (sorted position = instance), with their cost."""

    source: str  # "kineto" or "nvtx"
    index: nvtx.RangeIndex
    kernel_pos: np.ndarray  # per kernel row: sorted position of its innermost call, or -1
    name: np.ndarray  # per position: code into names
    names: list[str]
    key: np.ndarray  # per position: code into costs, -1 when not costed (no formula, no shapes)
    costs: list[OpCost | Uncounted]  # per key
    shapes: list[str]  # per key: the input sizes as text
    info: list[Embedding | None]  # per key: embedding table rows and index sizes, when one
    start: np.ndarray  # per position: host start time
    pid: np.ndarray  # per position
    dtype_evidence: list[str] = field(default_factory=list)  # per key (NVTX: where the dtype came from)


def instances(data: TraceData) -> Instances | str:
    """The costed operator calls of the trace, or why there are none (cached; what to do
    about it depends on the workload: compute/sources.py)."""
    return data.cached(CACHE_KEY, lambda: _build(data))


def _build(data: TraceData) -> Instances | str:
    try:
        data.operators()
    except Unavailable:
        return _from_nvtx(data)
    return _from_kineto(data)


def _embedding_info(s: OpShapes) -> Embedding | None:
    if short_name(s.op) != "embedding":
        return None
    table, idx = s.tensor(0), s.tensor(1)
    if not table or idx is None:
        return None
    return Embedding(int(table[0]), tuple(int(d) for d in idx))


def _cost(s: OpShapes | Uncounted, compute_dtype: str | None = None) -> tuple[OpCost | Uncounted, Embedding | None]:
    if isinstance(s, Uncounted):
        return s, None
    return op_cost(s, compute_dtype=compute_dtype), _embedding_info(s)


def _from_kineto(data: TraceData) -> Instances | str:
    ops = data.operators()
    att = operator_attribution(data)
    order = att.index.order
    if len(order) == 0:
        return "the trace has no operator events"
    shape = ops.shape[order]
    if not (shape >= 0).any():
        return "operator input shapes were not recorded"
    names = data.operator_names()
    name = ops.name[order]
    counted_name = np.array([has_formula(n) for n in names] or [False])
    concrete = ops.concrete[order] if "concrete" in ops else np.full(len(order), -1, np.int64)
    want = np.flatnonzero((shape >= 0) & counted_name[name])
    key = np.full(len(order), -1, dtype=np.int64)
    costs: list[OpCost | Uncounted] = []
    shapes_text: list[str] = []
    info: list[Embedding | None] = []
    k_op = att.kernel_op
    pos_of_row = np.full(len(ops), -1, dtype=np.int64)
    pos_of_row[order] = np.arange(len(order))
    kernel_pos = np.where(k_op >= 0, pos_of_row[np.maximum(k_op, 0)], -1)
    if len(want):
        codes, (kn, ks, kc) = group_codes(name[want], shape[want], concrete[want])
        key[want] = codes
        element = _element_bytes(data, kernel_pos, key, int(codes.max()) + 1)
        shape_list, values = data.operator_shapes(), data.operator_concrete_inputs()
        for i, (n, sh, c) in enumerate(zip(kn.tolist(), ks.tolist(), kc.tolist(), strict=True)):
            dims_text, types_text = shape_list[sh]
            try:
                args: JsonObject = {"Input Dims": json.loads(dims_text)}
                if types_text:
                    args["Input type"] = json.loads(types_text)
            except ValueError:
                args = {}
            if c >= 0:
                args["Concrete Inputs"] = values[c]
            cost, extra = _cost(from_kineto(names[n], args))
            cost = _concat_from_kernel(cost, names[n], args, element[i])
            costs.append(cost)
            shapes_text.append(dims_text)
            info.append(extra)
    return Instances(
        "kineto", att.index, kernel_pos, name, names, key, costs, shapes_text, info,
        ops.start[order], ops.pid[order], ["Input type"] * len(costs),
    )


def _element_bytes(data: TraceData, kernel_pos: np.ndarray, key: np.ndarray, n_keys: int) -> list[int]:
    """Per cost key: the element size its kernels state as `OpaqueType<N>` (PyTorch's
    type-erased copies, such as CatArrayBatchedCopy of a concatenation), when they all agree;
    0 when none states one or they disagree."""
    out = [0] * n_keys
    k = data.kernels()
    mine = np.flatnonzero(kernel_pos >= 0)
    if not len(mine) or not n_keys:
        return out
    kkey = key[kernel_pos[mine]]
    has = kkey >= 0
    mine, kkey = mine[has], kkey[has]
    if not len(mine):
        return out
    pairs, (p_key, p_name) = group_codes(kkey, k.name_id[mine])
    names = data.kernel_names(np.unique(p_name))
    seen: dict[int, set[int]] = {}
    for kk, nm in zip(p_key.tolist(), p_name.tolist(), strict=True):
        m = OPAQUE.search(names.get(int(nm), ""))
        if m:
            seen.setdefault(int(kk), set()).add(int(m.group(1)))
    for kk, sizes in seen.items():
        if len(sizes) == 1:
            out[kk] = next(iter(sizes))
    return out


def _concat_from_kernel(cost: OpCost | Uncounted, op: str, args: JsonObject, nbytes: int) -> OpCost | Uncounted:
    """A concatenation whose tensor list states no dtype, re-costed with the element size its
    kernel states (OpaqueType<4> is 4 bytes), not the assumed dtype's."""
    if (not isinstance(cost, OpCost) or cost.dtype_source != "assumed" or short_name(op) not in CONCAT
            or nbytes not in OPAQUE_DTYPE):
        return cost
    dtype = OPAQUE_DTYPE[nbytes] if dtypes.SIZES.get(cost.dtype) != nbytes else cost.dtype
    fixed, _ = _cost(from_kineto(op, args, dtype))
    if not isinstance(fixed, OpCost):
        return cost
    note = f"element size {nbytes} bytes from its kernel (OpaqueType<{nbytes}>)"
    return dataclasses.replace(fixed, dtype_source="stated", assumptions=(note, *fixed.assumptions))


def _sizes_key(text: str) -> tuple[str, str] | None:
    """(operator, sizes text) of a PyTorch NVTX range name, found without a full parse
    (sizes nest two levels, so the first "]]" closes them); None when it has no sizes."""
    i = text.find(SIZES)
    if i < 0:
        return None
    op = text[: text.find(",")].strip()
    start = i + len(SIZES) - 1
    if text.startswith("[]", start):
        return op, "[]"
    end = text.find("]]", start)
    return (op, text[start : end + 2]) if end > 0 else None


@frozen
class _KernelTypes:
    codes: list[tuple[str, str, str]]  # (dtype, compute class, evidence) per code
    pos_code: np.ndarray  # per NVTX position: code of its own longest typed kernel, or -1
    default: int  # code most kernel time states, or -1


def _kernel_types(data: TraceData, kernel_pos: np.ndarray, n_pos: int) -> _KernelTypes:
    k = data.kernels()
    name_codes, uniq = factorize(k.name_id)
    lookup = data.kernel_names(np.asarray(uniq, dtype=np.int64))
    found = [dtype_from_kernel(lookup.get(int(i), "")) for i in uniq]
    codes: list[tuple[str, str, str]] = []
    code_of: dict[tuple[str, str, str], int] = {}
    per_name = np.full(max(len(found), 1), -1, dtype=np.int64)
    for j, kd in enumerate(found):
        if kd is not None:
            entry = (kd.dtype, kd.compute_class, kd.evidence)
            per_name[j] = code_of.setdefault(entry, len(codes))
            if per_name[j] == len(codes):
                codes.append(entry)
    kcode = per_name[name_codes] if len(name_codes) else np.empty(0, np.int64)
    typed = np.flatnonzero(kcode >= 0)
    by_dtype = group_sum(k.dur[typed], kcode[typed], len(codes)) if len(codes) else np.zeros(0)
    default = int(np.argmax(by_dtype)) if len(codes) and by_dtype.max() > 0 else -1
    pos_code = np.full(n_pos, -1, dtype=np.int64)
    mine = typed[kernel_pos[typed] >= 0]
    if len(mine):
        order = np.lexsort((-k.dur[mine], kernel_pos[mine]))  # longest first per position
        first = np.r_[True, np.diff(kernel_pos[mine][order]) != 0]
        pos_code[kernel_pos[mine][order][first]] = kcode[mine][order][first]
    return _KernelTypes(codes, pos_code, default)


def _from_nvtx(data: TraceData) -> Instances | str:
    try:
        nv = data.nvtx()
        data.runtime()
    except Unavailable as exc:
        return f"no operator ranges: {exc.reason}"
    names = data.nvtx_names()
    keys = [_sizes_key(n) if "sizes" in n else None for n in names]
    sized = [i for i, kk in enumerate(keys) if kk is not None and has_formula(kk[0])]
    if not sized:
        named = any(n.startswith("aten::") for n in names)
        what = (
            "PyTorch operator ranges carry no input sizes" if named
            else "no NVTX range names an operator with its input sizes"
        )
        return what
    att = kernel_attribution(data)
    order = att.index.order
    raw = nv.name[order]
    # Calls are named by operator (aten::addmm), not by their raw names, unique per seq/op_id.
    norm_names, norm_of = normalized_names(data)
    name = norm_of[raw] if len(raw) else raw
    kt = _kernel_types(data, att.range_pos, len(order))
    key_of_name = np.full(len(names), -1, dtype=np.int64)
    distinct: dict[tuple[str, str], int] = {}
    for i in sized:
        key_of_name[i] = distinct.setdefault(keys[i], len(distinct))  # type: ignore[arg-type]
    sk = key_of_name[raw] if len(raw) else np.empty(0, np.int64)
    want = np.flatnonzero(sk >= 0)
    dcode = np.where(kt.pos_code[want] >= 0, kt.pos_code[want], kt.default)
    own = kt.pos_code[want] >= 0
    key = np.full(len(order), -1, dtype=np.int64)
    costs: list[OpCost | Uncounted] = []
    shapes_text: list[str] = []
    info: list[Embedding | None] = []
    evidence: list[str] = []
    ops_list = list(distinct)
    if len(want):
        codes, (ks, kd, ko) = group_codes(sk[want], dcode, own.astype(np.int64))
        key[want] = codes
        for s, d, o in zip(ks.tolist(), kd.tolist(), ko.tolist(), strict=True):
            op, sizes = ops_list[s]
            dtype, cls, why = kt.codes[d] if d >= 0 else (DEFAULT_DTYPE, DEFAULT_DTYPE, "")
            if d < 0:
                why = f"assumed {DEFAULT_DTYPE}: no kernel name states an element type"
            elif not o:
                why = f"the range's kernels state no type; most kernel time is {dtype} ({why})"
            override = cls if cls != dtypes.peak_class(dtype) else None
            shapes = shapes_from_nvtx(f"{op}, {SIZES[:-1]}{sizes}", dtype, why)
            cost, extra = _cost(shapes, override)
            costs.append(cost)
            shapes_text.append(sizes)
            info.append(extra)
            evidence.append(why)
    return Instances(
        "nvtx", att.index, att.range_pos, name, norm_names, key, costs, shapes_text, info,
        nv.start[order], nv.pid[order], evidence,
    )


LLM_KINDS = frozenset({"llm_inference", "llm_training"})
PYTORCH_KINDS = LLM_KINDS | {"pytorch_training", "pytorch_inference"}


def framework(workload: str, trace_format: TraceFormat) -> bool:
    """Whether the trace comes from PyTorch (whose operators can carry shapes)."""
    return workload in PYTORCH_KINDS or trace_format is TraceFormat.KINETO


def _not_framework(workload: str) -> str:
    if workload == "tensorrt_inference":
        return "a TensorRT engine's trace carries no operator shapes"
    return "a CUDA program outside PyTorch records no operator shapes in its trace"


def shapes_missing(reason: str, workload: str, trace_format: TraceFormat) -> str:
    """Why operator FLOPs and bytes are missing (`reason`, from compute_sources), with what
    to do about it for this workload."""
    if trace_format is TraceFormat.KINETO:
        return f"{reason}: {KINETO_CAPTURE}"
    if framework(workload, trace_format):
        return f"{reason}: {NVTX_CAPTURE}"
    return (
        f"{reason}; {_not_framework(workload)}: Nsight Compute measures each kernel's FLOPs and "
        "bytes (ncu_plan.sh lists the kernels worth it)"
    )


def model_inputs(workload: str, trace_format: TraceFormat) -> str:
    """The options that give model FLOPs (MFU) for this workload."""
    if workload in LLM_KINDS:
        return (
            "pass --model CONFIG.json (a Hugging Face config.json) or --model-flops-per-token N "
            "(with --tokens-per-step N when shapes are not recorded)"
        )
    if framework(workload, trace_format):
        return (
            "pass --model-flops-per-token N with --tokens-per-step N (FLOPs per token or sample, "
            "and tokens or samples per step; --model CONFIG.json describes decoder-only "
            "transformers)"
        )
    return (
        "pass the FLOPs one step must compute as --model-flops-per-token F with "
        "--tokens-per-step 1"
    )


def hfu_missing(workload: str, trace_format: TraceFormat) -> str:
    """Why HFU (measured operator FLOPs) is missing, for this workload."""
    if framework(workload, trace_format):
        return (
            "HFU: operator shapes were not recorded (PyTorch profiler: record_shapes=True; Nsight "
            "Systems: --pytorch=autograd-shapes-nvtx)"
        )
    return f"HFU: {_not_framework(workload)}"
