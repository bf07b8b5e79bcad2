"""Bytes-only operators, part 1: elementwise math, reductions, softmax and normalisation
(part 2 below has copies, gathers, factories, concatenation and views). Their arithmetic is
not counted (flops = 0); their cost is the data they must move: every tensor input read
once, every output written once.

The out= forms (mul.out, add.out, where.self_out) record the output tensor as one more
argument after the others. An elementwise call with more arguments than its op's widest
other form takes (ARITY), whose last argument is a tensor of the broadcast shape of the
tensors before it, is such a call: that tensor is written once and not read.

Bytes-only operators, part 2: data movement. Copies and casts, row gathers (embedding,
index_select), factories, concatenation, host reads of one element, and views.

View and allocation ops (view, transpose, empty ...) move no data and cost zero; an op that
may copy (aten::to, reshape, contiguous) records the copy as its own child op (_to_copy,
clone), so it is zero here too."""

from __future__ import annotations

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.cost import Family, OpCost, broadcast, direction_of, nbytes, numel
from nsys_llm_explainer.compute.shapes import OpShapes, Uncounted, parse_bool, parse_int, parse_int_list

ELEMENTWISE = frozenset(
    """add sub mul div rsub pow neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan
    tanh sigmoid silu gelu relu leaky_relu hardswish hardsigmoid hardtanh elu selu softplus mish
    clamp clamp_min clamp_max clip where masked_fill maximum minimum fmod remainder floor ceil
    round trunc frac sign sgn reciprocal erf erfinv lerp addcmul addcdiv bitwise_and bitwise_or
    bitwise_xor bitwise_not logical_and logical_or logical_xor logical_not eq ne lt le gt ge isnan
    isinf isfinite nan_to_num threshold threshold_backward silu_backward gelu_backward
    sigmoid_backward tanh_backward hardswish_backward leaky_relu_backward elu_backward
    _softmax_backward_data _log_softmax_backward_data clone square xlogy triu tril""".split()
)
# Arguments (tensors, scalars and keyword-only ones, as the profiler records them) of the
# widest form of each elementwise op that has no out= argument: add.Tensor(self, other,
# alpha), div.Tensor_mode(self, other, rounding_mode), clone(self, memory_format).
_ARITY_GROUPS = {
    1: """neg abs exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan tanh sigmoid silu
       relu hardswish hardsigmoid floor ceil trunc frac sign sgn reciprocal erf erfinv
       bitwise_not logical_not isnan isinf isfinite square selu mish""",
    2: """mul pow fmod remainder maximum minimum bitwise_and bitwise_or bitwise_xor logical_and
       logical_or logical_xor eq ne lt le gt ge xlogy clamp_min clamp_max gelu leaky_relu round
       clone triu tril silu_backward sigmoid_backward tanh_backward hardswish_backward""",
    3: """add sub rsub div where lerp clamp clip masked_fill hardtanh softplus threshold
       threshold_backward gelu_backward""",
    4: """addcmul addcdiv elu nan_to_num leaky_relu_backward _softmax_backward_data
       _log_softmax_backward_data""",
    6: "elu_backward",
}
ARITY = {op: n for n, ops in _ARITY_GROUPS.items() for op in ops.split()}
COMPARISONS = frozenset(
    "eq ne lt le gt ge isnan isinf isfinite logical_and logical_or logical_xor logical_not".split()
)
REDUCTIONS = frozenset(
    """sum mean amax amin max min prod norm linalg_vector_norm var std var_mean std_mean logsumexp
    argmax argmin all any count_nonzero nansum cumsum cumprod""".split()
)
SOFTMAX = frozenset("softmax _softmax log_softmax _log_softmax".split())
NORMS = frozenset(
    """layer_norm native_layer_norm rms_norm _fused_rms_norm group_norm native_group_norm
    batch_norm native_batch_norm cudnn_batch_norm _batch_norm_impl_index instance_norm""".split()
)
# Ops PyTorch implements by calling a child op that has its own formula here.
COMPOSITE = frozenset(
    """softmax log_softmax layer_norm group_norm batch_norm _batch_norm_impl_index
    instance_norm dropout embedding""".split()
)
# A reduction keeps its dims only in these ops' (dim, keepdim) argument positions.
_DIM_ARGS = {
    "sum": (1, 2),
    "mean": (1, 2),
    "amax": (1, 2),
    "amin": (1, 2),
    "nansum": (1, 2),
    "var": (1, 3),
    "std": (1, 3),
    "logsumexp": (1, 2),
    "prod": (1, 2),
    "norm": (2, 3),
    "linalg_vector_norm": (2, 3),
    "argmax": (1, 2),
    "argmin": (1, 2),
    "all": (1, 2),
    "any": (1, 2),
    "max": (1, 2),
    "min": (1, 2),
    "count_nonzero": (1, None),
}
FULL_REDUCTION_NOTE = "reduced dims not recorded: output counted as one element (a lower bound)"


def bytes_cost(
    s: OpShapes,
    family: Family,
    read: int,
    written: int,
    dtype: str,
    formula: str,
    notes: tuple[str, ...] = (),
    composite: bool = False,
) -> OpCost:
    return OpCost(
        op=s.op,
        family=family,
        direction=direction_of(s.op),
        flops=0,
        bytes_read=read,
        bytes_written=written,
        dtype=dtype,
        compute_dtype=None,
        dtype_source=s.dtype_source,
        formula=formula,
        assumptions=notes,
        composite=composite,
    )


def all_inputs(s: OpShapes) -> int:
    return sum(nbytes(d, dt) for d, dt in s.tensors())


def first_tensor(s: OpShapes) -> tuple[tuple[int, ...], str] | None:
    t = s.tensors()
    return t[0] if t else None


def out_argument(s: OpShapes, base: str) -> bool:
    """Whether the call's last argument is its out= tensor (see the module docstring)."""
    arity = ARITY.get(base)
    if arity is None or len(s.args) <= arity:
        return False
    last = s.args[-1]
    before = [d for a in s.args[:-1] for d in ((a.dims,) if a.dims is not None else ()) + a.items]
    if last.dims is None or not before:
        return False
    return broadcast(*before) == last.dims


def elementwise(s: OpShapes, base: str, inplace: bool) -> OpCost | Uncounted:
    ts = [(d, dt) for d, dt in s.tensors()]
    if not ts:
        return Uncounted(s.op, "no tensor input recorded")
    out_arg = ts[-1] if not inplace and len(ts) > 1 and out_argument(s, base) else None
    if out_arg is not None:
        ts = ts[:-1]
    out = ts[0][0] if inplace else broadcast(*(d for d, _ in ts))
    if out is None:
        return Uncounted(s.op, f"input sizes {[list(d) for d, _ in ts]} do not broadcast")
    floats = [dt for _, dt in ts if dt in ("fp64", "fp32", "fp16", "bf16")]
    out_dtype = (
        "bool"
        if base in COMPARISONS
        else (ts[0][1] if inplace else (floats[0] if floats else ts[0][1]))
    )
    if out_arg is not None:
        out_dtype = out_arg[1]
    read = sum(nbytes(d, dt) for d, dt in ts)
    written = nbytes(out, out_dtype)
    formula = f"read inputs {read} B, write {list(out)} {out_dtype}"
    return bytes_cost(
        s,
        "memory",
        read,
        written,
        out_dtype,
        formula + (" (the out= argument, written only)" if out_arg is not None else ""),
    )


def _reduced(
    s: OpShapes, base: str, dims: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Output sizes of a reduction from its recorded (dim, keepdim) values."""
    if base in ("cumsum", "cumprod"):
        return dims, ()
    di, ki = _DIM_ARGS.get(base, (1, 2))
    if s.concrete:
        if len(s.args) <= di or s.arg(di).value is None:
            return (), ()  # no dim argument, or dim=None: everything is reduced
        reduce = parse_int_list(s.arg(di).value)
        if reduce is not None and dims:
            keep = bool(parse_bool(s.arg(ki).value)) if ki is not None else False
            axes = {a % len(dims) for a in reduce} if reduce else set(range(len(dims)))
            if keep:
                return tuple(1 if i in axes else n for i, n in enumerate(dims)), ()
            return tuple(n for i, n in enumerate(dims) if i not in axes), ()
    return (), (FULL_REDUCTION_NOTE,)


def reduction(s: OpShapes, base: str) -> OpCost | Uncounted:
    first = first_tensor(s)
    if first is None:
        return Uncounted(s.op, "no tensor input recorded")
    dims, dtype = first
    out, notes = _reduced(s, base, dims)
    out_dtype = {
        "argmax": "int64",
        "argmin": "int64",
        "count_nonzero": "int64",
        "all": "bool",
        "any": "bool",
    }.get(base, dtype)
    written = nbytes(out, out_dtype) * (2 if base in ("var_mean", "std_mean") else 1)
    return bytes_cost(
        s, "memory", all_inputs(s), written, dtype, f"read {list(dims)}, write {list(out)}", notes
    )


def softmax(s: OpShapes, base: str) -> OpCost | Uncounted:
    first = first_tensor(s)
    if first is None:
        return Uncounted(s.op, "no tensor input recorded")
    dims, dtype = first
    out_dtype = "fp32" if base.startswith("_") and parse_bool(s.arg(2).value) else dtype
    return bytes_cost(
        s,
        "memory",
        all_inputs(s),
        nbytes(dims, out_dtype),
        dtype,
        f"read and write {list(dims)}",
        composite=base in COMPOSITE,
    )


def norm(s: OpShapes, base: str) -> OpCost | Uncounted:
    first = first_tensor(s)
    if first is None:
        return Uncounted(s.op, "no tensor input recorded")
    dims, dtype = first
    normalized = parse_int_list(s.arg(1).value) if "layer" in base or "rms" in base else None
    rows = (
        numel(dims[: len(dims) - len(normalized)])
        if normalized and len(normalized) <= len(dims)
        else (numel(dims[:-1]) if dims else 1)
    )
    stats = {"native_layer_norm": 2, "_fused_rms_norm": 1}.get(base, 0) * rows * 4  # fp32 mean/rstd
    written = nbytes(dims, dtype) + stats
    return bytes_cost(
        s,
        "memory",
        all_inputs(s),
        written,
        dtype,
        f"read inputs, write {list(dims)} (+{stats} B stats)",
        composite=base in COMPOSITE,
    )


# Backward ops whose outputs are gradients of inputs at these argument positions.
GRAD_OF = {
    "native_layer_norm_backward": (1, 5, 6),  # (grad_out, input, shape, mean, rstd, weight, bias)
    "native_group_norm_backward": (1, 4),  # (grad_out, input, mean, rstd, weight, ...)
    "native_batch_norm_backward": (1, 2),  # (grad_out, input, weight, ...)
}


def backward_grads(s: OpShapes, base: str) -> OpCost | Uncounted:
    """Norm backward ops: read every input, write one gradient per differentiable input."""
    picks = [s.tensor(i) for i in GRAD_OF[base]]
    if picks[0] is None:
        return Uncounted(s.op, "the input tensor was not recorded")
    dtype = s.tensor_dtype(0)
    written = sum(nbytes(d, dtype) for d in picks if d is not None)
    return bytes_cost(
        s, "memory", all_inputs(s), written, dtype, "read inputs, write their gradients"
    )


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
