"""Bytes-only operators, part 2: data movement. Copies and casts, row gathers (embedding,
index_select), factories, concatenation, host reads of one element, and views.

View and allocation ops (view, transpose, empty ...) move no data and cost zero; an op that
may copy (aten::to, reshape, contiguous) records the copy as its own child op (_to_copy,
clone), so it is zero here too.
"""

from __future__ import annotations

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.cost import OpCost, nbytes, numel
from nsys_llm_explainer.compute.memory_ops import COMPOSITE, all_inputs, bytes_cost, first_tensor
from nsys_llm_explainer.compute.shapes import OpShapes, Uncounted, parse_int, parse_int_list

VIEWS = frozenset(
    """view reshape _reshape_alias _unsafe_view as_strided t transpose permute expand expand_as
    unsqueeze squeeze slice select narrow detach alias unflatten flatten split split_with_sizes
    chunk unbind view_as numpy_T lift_fresh resolve_conj resolve_neg result_type
    _has_compatible_shallow_copy_type empty_strided empty_like new_empty new_empty_strided
    resize_ record_stream set_ to contiguous type_as detach_ squeeze_ unsqueeze_ t_ transpose_""".split()
)


def gather_rows(s: OpShapes, base: str) -> OpCost | Uncounted:
    """embedding(weight [V, D], indices) / index_select(self, dim, index): only the rows the
    indices pick are read, not the whole table."""
    table, idx = (0, 1) if base == "embedding" else (0, 2)
    w, ix = s.tensor(table), s.tensor(idx)
    if not w or ix is None:
        return Uncounted(s.op, f"needs a table and an index tensor ({w}, {ix})")
    dim = 0 if base == "embedding" else (parse_int(s.arg(1).value) or 0) % len(w)
    row = numel(w) // w[dim] if w[dim] else 0
    n = numel(ix)
    dtype = s.tensor_dtype(table)
    picked = n * row * dtypes.size(dtype)
    read = picked + nbytes(ix, s.tensor_dtype(idx))
    return bytes_cost(
        s, "memory", read, picked, dtype, f"{n} rows of {row} {dtype}", composite=base in COMPOSITE
    )


def copy_like(s: OpShapes, base: str) -> OpCost | Uncounted:
    first = first_tensor(s)
    if first is None:
        return Uncounted(s.op, "no tensor input recorded")
    dims, dtype = first
    if base == "copy_":  # copy_(self, src): read src, write self
        src = s.tensor(1)
        read = nbytes(src, s.tensor_dtype(1)) if src is not None else 0
        return bytes_cost(
            s, "memory", read, nbytes(dims, dtype), dtype, f"read src, write {list(dims)}"
        )
    if base in ("fill_", "zero_", "zeros_like", "ones_like", "full_like"):
        return bytes_cost(s, "memory", 0, nbytes(dims, dtype), dtype, f"write {list(dims)}")
    out_dtype = dtype
    if base == "_to_copy":
        out_dtype = dtypes.from_scalar_type(s.arg(1).value) or dtype
    written = nbytes(dims, out_dtype)
    if base == "native_dropout":
        written += numel(dims)  # the bool mask
    return bytes_cost(
        s,
        "memory",
        nbytes(dims, dtype),
        written,
        out_dtype,
        f"read {list(dims)} {dtype}, write {out_dtype}",
    )


def concat(s: OpShapes) -> OpCost | Uncounted:
    ts = s.tensors()
    if not ts:
        return Uncounted(s.op, "the tensor list sizes were not recorded")
    total = sum(nbytes(d, dt) for d, dt in ts)
    return bytes_cost(s, "memory", total, total, ts[0][1], f"read and write {len(ts)} tensors")


SCALAR_READS = frozenset("item _local_scalar_dense is_nonzero".split())
FACTORIES = {"zeros": 1, "ones": 1, "empty": 1, "full": 2, "rand": 1, "randn": 1}  # dtype arg index


def scalar_read(s: OpShapes) -> OpCost | Uncounted:
    """item() and friends: one element copied to the host (and a device sync)."""
    first = first_tensor(s)
    if first is None:
        return Uncounted(s.op, "no tensor input recorded")
    return bytes_cost(
        s, "memory", nbytes(first[0], first[1]), 0, first[1], "one element read by the host"
    )


def factory(s: OpShapes, base: str) -> OpCost | Uncounted:
    """zeros(size, dtype, ...) and friends: the output is written, nothing is read; empty
    allocates without writing."""
    size = parse_int_list(s.arg(0).value)
    if size is None or any(n < 0 for n in size):
        return Uncounted(s.op, "the output size was not recorded")
    dtype = dtypes.from_scalar_type(s.arg(FACTORIES[base]).value) or "fp32"
    notes = (
        () if s.arg(FACTORIES[base]).value else ("dtype not recorded: float32, PyTorch's default",)
    )
    written = 0 if base == "empty" else nbytes(size, dtype)
    return bytes_cost(s, "memory", 0, written, dtype, f"write {list(size)} {dtype}", notes)


def view(s: OpShapes) -> OpCost:
    return bytes_cost(s, "view", 0, 0, s.dtype, "metadata only: no data moved")


def embedding_backward(s: OpShapes) -> OpCost | Uncounted:
    """embedding_dense_backward(grad_output, indices, num_weights, ...): the whole gradient
    table [num_weights, D] is written (zeroed, then accumulated)."""
    go = s.tensor(0)
    rows = parse_int(s.arg(2).value)
    if not go:
        return Uncounted(s.op, "grad_output was not recorded")
    notes: tuple[str, ...] = ()
    if rows is None:
        rows = numel(go[:-1])
        notes = ("num_weights not recorded: only the looked-up rows counted as written",)
    dtype = s.tensor_dtype(0)
    return bytes_cost(
        s,
        "memory",
        all_inputs(s),
        rows * go[-1] * dtypes.size(dtype),
        dtype,
        f"write [{rows}, {go[-1]}]",
        notes,
    )
