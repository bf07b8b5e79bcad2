"""Which operator calls to count, so that each product and each byte is counted once, and
which counted call each kernel belongs to.

PyTorch operators nest: aten::linear calls aten::addmm, aten::clone calls aten::copy_,
scaled_dot_product_attention calls _flash_attention_forward. A call is counted when

- it has a cost (FLOPs or bytes) and lies inside no counted matrix-product call (a GEMM,
  convolution or attention call that is not composite counts, and everything inside it is
  part of its work), and
- it computes FLOPs without being composite, or no costed call lies inside it (a composite
  whose children were recorded defers to them; one whose children were not counts itself).

Counted calls never nest, so a kernel belongs to at most one: the counted call among the
containers of its innermost call. A call's GPU time is the time of the kernels that belong to
it; calls without kernels (CPU tensors) are not placed on the GPU's roofline.
"""

from __future__ import annotations

import numpy as np

from nsys_llm_explainer.analysis import nvtx
from nsys_llm_explainer.analysis.groups import group_sum
from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.cost import OpCost
from nsys_llm_explainer.compute.shapes import Uncounted
from nsys_llm_explainer.compute.sources import Instances, instances
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.math_mode import math_mode
from nsys_llm_explainer.trace.data import TraceData

VIEW_KEY = "compute_view"
MATRIX = ("gemm", "conv", "attention")


@frozen
class KeyCosts:
    """Per cost key: the numbers of its OpCost (zeros for Uncounted)."""

    flops: np.ndarray  # float64
    bytes: np.ndarray  # float64
    costed: np.ndarray  # bool: an OpCost with FLOPs or bytes
    leaf: np.ndarray  # bool: FLOPs and not composite


@frozen
class Counted:
    pos: np.ndarray  # sorted positions of the counted calls
    kernel_call: np.ndarray  # per kernel row: index into pos, or -1
    kernel_ns: np.ndarray  # per counted call: time of its kernels
    kernels: np.ndarray  # per counted call: number of its kernels
    costed_calls: int  # calls with a cost, counted or not


def key_costs(inst: Instances) -> KeyCosts:
    n = len(inst.costs)
    flops = np.zeros(n)
    nbytes = np.zeros(n)
    composite = np.zeros(n, dtype=bool)
    for i, c in enumerate(inst.costs):
        if isinstance(c, OpCost):
            flops[i], nbytes[i], composite[i] = float(c.flops), float(c.bytes), c.composite
    return KeyCosts(flops, nbytes, (flops > 0) | (nbytes > 0), (flops > 0) & ~composite)


def _lookup(values: np.ndarray, key: np.ndarray) -> np.ndarray:
    return values[np.maximum(key, 0)] & (key >= 0) if len(values) else np.zeros(len(key), bool)


def count(inst: Instances, kc: KeyCosts, kernel_dur: np.ndarray) -> Counted:
    index: nvtx.RangeIndex = inst.index
    costed = _lookup(kc.costed, inst.key)
    leaf = _lookup(kc.leaf, inst.key)
    pos = np.flatnonzero(costed)
    rr, cc = nvtx.containers(index, pos)
    inner = rr != cc
    rr, cc = rr[inner], cc[inner]
    suppressed = np.zeros(len(costed), dtype=bool)
    suppressed[rr[leaf[cc]]] = True
    live = ~suppressed[rr]
    has_costed_inside = np.zeros(len(costed), dtype=bool)
    has_costed_inside[cc[live]] = True
    counted = costed & ~suppressed & (leaf | ~has_costed_inside)
    counted_pos = np.flatnonzero(counted)
    slot = np.full(len(costed), -1, dtype=np.int64)
    slot[counted_pos] = np.arange(len(counted_pos))
    kpos = inst.kernel_pos
    kernel_call = np.full(len(kpos), -1, dtype=np.int64)
    with_pos = np.flatnonzero(kpos >= 0)
    if len(with_pos) and len(counted_pos):
        distinct_pos, inverse = np.unique(kpos[with_pos], return_inverse=True)
        pr, pc = nvtx.containers(index, distinct_pos)
        hit = counted[pc]
        owner = np.full(len(costed), -1, dtype=np.int64)
        owner[pr[hit]] = slot[pc[hit]]
        kernel_call[with_pos] = owner[distinct_pos][inverse]
    mine = kernel_call >= 0
    ncalls = len(counted_pos)
    return Counted(
        pos=counted_pos,
        kernel_call=kernel_call,
        kernel_ns=group_sum(kernel_dur[mine], kernel_call[mine], ncalls),
        kernels=np.bincount(kernel_call[mine], minlength=ncalls),
        costed_calls=int(costed.sum()),
    )


@frozen
class ComputeView:
    """The costed calls of a trace, the counted ones, and where their kernels ran."""

    inst: Instances
    kc: KeyCosts
    counted: Counted
    call_key: np.ndarray  # per counted call: its cost key
    call_device: np.ndarray  # per counted call: device of its longest kernel, -1 without kernels
    call_cls: np.ndarray  # per counted call: the peak class it is measured against (object)


def compute_view(data: TraceData) -> ComputeView | str:
    """Built once per trace (cached); a string says why there is nothing to count."""

    def build() -> ComputeView | str:
        inst = instances(data)
        if isinstance(inst, str):
            return inst
        k = data.kernels()
        kc = key_costs(inst)
        c = count(inst, kc, k.dur)
        device = np.full(len(c.pos), -1, dtype=np.int64)
        longest = np.full(len(c.pos), -1, dtype=np.int64)  # name_id of the call's longest kernel
        mine = np.flatnonzero(c.kernel_call >= 0)
        if len(mine):
            order = np.lexsort((-k.dur[mine], c.kernel_call[mine]))
            calls = c.kernel_call[mine][order]
            first = np.r_[True, np.diff(calls) != 0]
            device[calls[first]] = k.device[mine][order][first]
            longest[calls[first]] = k.name_id[mine][order][first]
        call_key = inst.key[c.pos]
        return ComputeView(inst, kc, c, call_key, device, _classes(data, inst, call_key, longest))

    return data.cached(VIEW_KEY, build)


def _classes(data: TraceData, inst: Instances, call_key: np.ndarray, longest: np.ndarray) -> np.ndarray:
    """Per counted call, the peak class: the formula's, except that float32 matrix work is
    measured against the mode its own kernel's name shows (kernels/math_mode.py): TF32 for fp32
    operands on tensor cores, the FP32 CUDA-core peak for a SIMT kernel."""
    n = len(inst.costs)
    base = np.array([_cls(c) for c in inst.costs] + [""], dtype=object)
    out = base[np.where(call_key >= 0, call_key, n)]
    fp32_matrix = np.array(
        [isinstance(c, OpCost) and c.family in MATRIX and c.dtype == "fp32" for c in inst.costs] + [False]
    )[np.where(call_key >= 0, call_key, n)] & (longest >= 0)
    ids = np.unique(longest[fp32_matrix])
    if len(ids):
        names = data.kernel_names(ids)
        mode = {int(i): math_mode(names.get(int(i), "")).dtype for i in ids.tolist()}
        for j in np.flatnonzero(fp32_matrix).tolist():
            m = mode.get(int(longest[j]))
            if m in ("tf32", "fp32"):
                out[j] = m
    return out


def _cls(c: OpCost | Uncounted) -> str:
    if not isinstance(c, OpCost):
        return ""
    return c.compute_dtype or dtypes.peak_class(c.dtype) or ""
