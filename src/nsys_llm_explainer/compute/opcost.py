"""One entry point: the cost (FLOPs and bytes) of one operator call, by its name.

    op_cost(shapes)                 -> OpCost | Uncounted
    cost_kineto(name, args)         -> the same, from a Kineto cpu_op event
    cost_nvtx(range_name, dtype)    -> the same, from a PyTorch NVTX range name

Names are matched without their namespace and overload ("aten::addmm.default" -> addmm).
Autograd node ranges (MmBackward0, "autograd::engine::evaluate_function: ...") are not
counted: their work is in the aten ops they call. Ops nest (aten::linear calls aten::addmm);
OpCost.composite marks the outer one so that a caller counts each product once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from nsys_llm_explainer.compute import attention, conv, gemm, memory_ops
from nsys_llm_explainer.compute.cost import OpCost, short_name
from nsys_llm_explainer.compute.shapes import OpShapes, Uncounted, from_kineto, shapes_from_nvtx

Formula = Callable[[OpShapes, str | None], OpCost | Uncounted]

GEMM: dict[str, Formula] = {
    "mm": gemm.mm,
    "addmm": gemm.addmm,
    "bmm": gemm.bmm,
    "baddbmm": gemm.baddbmm,
    "matmul": gemm.matmul,
    "linear": gemm.linear,
    "_scaled_mm": gemm.scaled_mm,
    "_int_mm": gemm.int_mm,
}
VECTOR_PRODUCTS = frozenset({"mv", "dot", "vdot", "inner"})  # matmul's formula, no child op
COPIES = frozenset(
    "copy_ fill_ zero_ zeros_like ones_like full_like _to_copy native_dropout".split()
)
CONCAT = frozenset("cat concat concatenate stack hstack vstack _cat".split())


# Short names op_cost gives a non-zero cost (views, allocations and dropout count nothing).
COUNTED = frozenset(
    set(GEMM) | VECTOR_PRODUCTS | set(conv.SIGNATURES) | {"convolution_backward"}
    | set(attention.OPS) | memory_ops.SCALAR_READS | set(memory_ops.FACTORIES) | COPIES | CONCAT
    | {"embedding", "index_select", "embedding_dense_backward"} | memory_ops.SOFTMAX
    | memory_ops.NORMS | memory_ops.REDUCTIONS | set(memory_ops.GRAD_OF) | memory_ops.ELEMENTWISE
    | {f"{e}_" for e in memory_ops.ELEMENTWISE}
) - {"empty"}


def has_formula(op: str) -> bool:
    """Whether op_cost can give this operator a non-zero cost: a cheap filter before the
    shapes of its calls are parsed (views, autograd nodes and unknown ops cost nothing)."""
    return not is_autograd_node(op) and short_name(op) in COUNTED


def is_autograd_node(op: str) -> bool:
    name = op.strip()
    return name.startswith("autograd::") or ("Backward" in name and "::" not in name)


def op_cost(
    s: OpShapes, *, causal: bool | None = None, compute_dtype: str | None = None
) -> OpCost | Uncounted:
    """The cost of one recorded operator call.

    `causal` overrides the attention mask flag when the caller knows it; `compute_dtype` the
    peak class a matrix product ran at (e.g. "tf32" when the kernel name says so).
    """
    if is_autograd_node(s.op):
        return Uncounted(s.op, "an autograd node: its work is counted in the aten ops it calls")
    base = short_name(s.op)
    if base in GEMM:
        return GEMM[base](s, compute_dtype)
    if base in VECTOR_PRODUCTS:
        cost = gemm.matmul(s, compute_dtype)
        return replace(cost, composite=False) if isinstance(cost, OpCost) else cost
    if base in conv.SIGNATURES:
        return conv.convolution(s, compute_dtype)
    if base == "convolution_backward":
        return conv.convolution_backward(s, compute_dtype)
    if base in attention.OPS:
        return attention.attention(s, causal, compute_dtype)
    return _bytes_only(s, base)


def _bytes_only(s: OpShapes, base: str) -> OpCost | Uncounted:
    if base in memory_ops.VIEWS:
        return memory_ops.view(s)
    if base in memory_ops.SCALAR_READS:
        return memory_ops.scalar_read(s)
    if base in memory_ops.FACTORIES:
        return memory_ops.factory(s, base)
    if base in COPIES:
        return memory_ops.copy_like(s, base)
    if base in CONCAT:
        return memory_ops.concat(s)
    if base in ("embedding", "index_select"):
        return memory_ops.gather_rows(s, base)
    if base == "embedding_dense_backward":
        return memory_ops.embedding_backward(s)
    if base in memory_ops.SOFTMAX:
        return memory_ops.softmax(s, base)
    if base in memory_ops.NORMS:
        return memory_ops.norm(s, base)
    if base in memory_ops.REDUCTIONS:
        return memory_ops.reduction(s, base)
    if base in memory_ops.GRAD_OF:
        return memory_ops.backward_grads(s, base)
    if base in memory_ops.ELEMENTWISE:
        return memory_ops.elementwise(s, base, inplace=False)
    if base.endswith("_") and base[:-1] in memory_ops.ELEMENTWISE:
        return memory_ops.elementwise(s, base[:-1], inplace=True)
    if base == "dropout":
        return memory_ops.view(s)  # runs native_dropout (counted there) or nothing in eval
    return Uncounted(s.op, f"no FLOP or byte formula for {base}")


def cost_kineto(
    name: str,
    args: Mapping[str, Any],
    *,
    causal: bool | None = None,
    compute_dtype: str | None = None,
    fallback_dtype: str = "bf16",
) -> OpCost | Uncounted:
    if is_autograd_node(name):
        return Uncounted(name, "an autograd node: its work is counted in the aten ops it calls")
    shapes = from_kineto(name, args, fallback_dtype)
    if isinstance(shapes, Uncounted):
        return shapes
    return op_cost(shapes, causal=causal, compute_dtype=compute_dtype)


def cost_nvtx(
    range_name: str,
    dtype: str,
    dtype_evidence: str = "given by the caller",
    *,
    causal: bool | None = None,
    compute_dtype: str | None = None,
) -> OpCost | Uncounted:
    shapes = shapes_from_nvtx(range_name, dtype, dtype_evidence)
    if isinstance(shapes, Uncounted):
        return shapes
    return op_cost(shapes, causal=causal, compute_dtype=compute_dtype)
