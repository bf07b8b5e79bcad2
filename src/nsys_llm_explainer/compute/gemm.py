"""Matrix products: mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm (FP8), _int_mm.

FLOPs = 2*M*N*K per product (times the batch); see docs/compute.md for each signature.
Bytes read are every tensor input (bias and scales included) once; bytes written the
output once, in the input dtype (or _scaled_mm's out_dtype).
"""

from __future__ import annotations

from dataclasses import replace

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.cost import OpCost, broadcast, direction_of, nbytes, numel
from nsys_llm_explainer.compute.shapes import OpShapes, Uncounted

FP32_NOTE = (
    "float32 matmul counted at the FP32 (non-tensor) peak, PyTorch's default "
    "(allow_tf32=False); pass compute_dtype='tf32' when the kernel name shows TF32"
)


def compute_class(dtype: str, override: str | None) -> tuple[str | None, tuple[str, ...]]:
    """The peak class a matrix product on `dtype` runs at, and the note that goes with it."""
    if override:
        return override, ()
    return dtypes.peak_class(dtype), ((FP32_NOTE,) if dtype == "fp32" else ())


def _cost(
    s: OpShapes,
    flops: int,
    formula: str,
    reads: list[int],
    out_dims: tuple[int, ...],
    out_dtype: str,
    compute_dtype: str | None,
    composite: bool = False,
    extra_notes: tuple[str, ...] = (),
    dims: tuple[int, int, int, int] | None = None,
) -> OpCost:
    in_dtype = s.tensor_dtype(0) if s.tensor(0) is not None else s.dtype
    cls, notes = compute_class(in_dtype, compute_dtype)
    return OpCost(
        op=s.op,
        family="gemm",
        direction=direction_of(s.op),
        flops=flops,
        bytes_read=sum(reads),
        bytes_written=nbytes(out_dims, out_dtype),
        dtype=in_dtype,
        compute_dtype=cls,
        dtype_source=s.dtype_source,
        formula=formula,
        assumptions=notes + extra_notes,
        composite=composite,
        extra=dict(zip(("batch", "m", "n", "k"), dims, strict=True)) if dims else {},
    )


def _in(s: OpShapes, i: int) -> int:
    d = s.tensor(i)
    return nbytes(d, s.tensor_dtype(i)) if d is not None else 0


def _need(s: OpShapes, idx: tuple[int, ...], ranks: tuple[int, ...]) -> Uncounted | None:
    for i, r in zip(idx, ranks, strict=True):
        d = s.tensor(i)
        if d is None or len(d) != r:
            return Uncounted(s.op, f"argument {i} is not a {r}-D tensor (sizes {d})")
    return None


def mm(s: OpShapes, compute_dtype: str | None = None, a: int = 0, b: int = 1) -> OpCost | Uncounted:
    """mm(self [M,K], mat2 [K,N]); addmm/_scaled_mm reuse it with other argument indices."""
    bad = _need(s, (a, b), (2, 2))
    if bad:
        return bad
    (m, k), (k2, n) = s.tensor(a), s.tensor(b)  # type: ignore[misc]
    if k != k2:
        return Uncounted(s.op, f"inner sizes differ: [{m}, {k}] x [{k2}, {n}]")
    formula = f"2*M*N*K = 2*{m}*{n}*{k}"
    reads = [_in(s, i) for i in range(len(s.args))]
    return _cost(
        s, 2 * m * n * k, formula, reads, (m, n), s.tensor_dtype(a), compute_dtype,
        dims=(1, m, n, k),
    )


def addmm(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """addmm(self (bias), mat1 [M,K], mat2 [K,N], beta, alpha): the bias add is not counted."""
    return mm(s, compute_dtype, a=1, b=2)


def _bmm(s: OpShapes, a: int, b: int, compute_dtype: str | None) -> OpCost | Uncounted:
    bad = _need(s, (a, b), (3, 3))
    if bad:
        return bad
    (bs, m, k), (bs2, k2, n) = s.tensor(a), s.tensor(b)  # type: ignore[misc]
    if bs != bs2 or k != k2:
        return Uncounted(
            s.op, f"batch or inner sizes differ: [{bs}, {m}, {k}] x [{bs2}, {k2}, {n}]"
        )
    formula = f"2*B*M*N*K = 2*{bs}*{m}*{n}*{k}"
    reads = [_in(s, i) for i in range(len(s.args))]
    return _cost(
        s, 2 * bs * m * n * k, formula, reads, (bs, m, n), s.tensor_dtype(a), compute_dtype,
        dims=(bs, m, n, k),
    )


def bmm(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """bmm(self [B,M,K], mat2 [B,K,N])."""
    return _bmm(s, 0, 1, compute_dtype)


def baddbmm(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """baddbmm(self, batch1 [B,M,K], batch2 [B,K,N], beta, alpha)."""
    return _bmm(s, 1, 2, compute_dtype)


def matmul(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """torch.matmul with every broadcasting case (1-D operands, batch broadcast)."""
    a, b = s.tensor(0), s.tensor(1)
    if not a or not b:
        return Uncounted(s.op, f"matmul needs two tensors of rank >= 1 (sizes {a}, {b})")
    a2 = (1, *a) if len(a) == 1 else a  # a vector on the left is a 1-row matrix
    b2 = (*b, 1) if len(b) == 1 else b  # a vector on the right is a 1-column matrix
    m, k = a2[-2], a2[-1]
    k2, n = b2[-2], b2[-1]
    batch = broadcast(a2[:-2], b2[:-2])
    if k != k2 or batch is None:
        return Uncounted(s.op, f"sizes {list(a)} and {list(b)} do not multiply")
    out = list(batch) + ([m] if len(a) > 1 else []) + ([n] if len(b) > 1 else [])
    nb = numel(batch)
    formula = f"2*batch*M*N*K = 2*{nb}*{m}*{n}*{k}"
    reads = [_in(s, 0), _in(s, 1)]
    return _cost(
        s,
        2 * nb * m * n * k,
        formula,
        reads,
        tuple(out),
        s.tensor_dtype(0),
        compute_dtype,
        composite=True,
        dims=(nb, m, n, k),
    )


def linear(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """linear(input [..., in], weight [out, in], bias [out] or None)."""
    x, w = s.tensor(0), s.tensor(1)
    if not x or w is None or len(w) != 2:
        return Uncounted(
            s.op, f"linear needs input [..., in] and weight [out, in] (sizes {x}, {w})"
        )
    out_f, in_f = w
    if x[-1] != in_f:
        return Uncounted(s.op, f"input features {x[-1]} differ from weight [{out_f}, {in_f}]")
    rows = numel(x[:-1])
    bias = s.tensor(2)
    formula = f"2*rows*in*out = 2*{rows}*{in_f}*{out_f}" + (
        " (bias add not counted)" if bias else ""
    )
    reads = [_in(s, 0), _in(s, 1), _in(s, 2)]
    out = (*x[:-1], out_f)
    return _cost(
        s,
        2 * rows * in_f * out_f,
        formula,
        reads,
        out,
        s.tensor_dtype(0),
        compute_dtype,
        composite=True,
        dims=(1, rows, out_f, in_f),
    )


def scaled_mm(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """_scaled_mm(self [M,K] fp8, mat2 [K,N] fp8, scale_a, scale_b, bias, scale_result,
    out_dtype, use_fast_accum): out_dtype (a ScalarType code) sets the output size."""
    cost = mm(s, compute_dtype)
    if isinstance(cost, Uncounted):
        return cost
    out_dtype = dtypes.from_scalar_type(s.arg(6).value) if s.arg(6).value else None
    notes = cost.assumptions
    if out_dtype is None:
        out_dtype = cost.dtype
        notes += ("out_dtype not recorded: output counted in the input dtype",)
    m, n = s.tensor(0)[0], s.tensor(1)[1]  # type: ignore[index]
    return replace(cost, bytes_written=nbytes((m, n), out_dtype), assumptions=notes)


def int_mm(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """_int_mm(self [M,K] int8, mat2 [K,N] int8) -> int32 [M,N]."""
    cost = mm(s, compute_dtype or "int8")
    if isinstance(cost, Uncounted):
        return cost
    m, n = s.tensor(0)[0], s.tensor(1)[1]  # type: ignore[index]
    return replace(cost, bytes_written=nbytes((m, n), "int32"))
