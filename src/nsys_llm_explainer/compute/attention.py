"""Attention: scaled_dot_product_attention and the flash / memory-efficient / cuDNN kernels
behind it, forward and backward.

Forward FLOPs = 2*B*Hq*Lq*Lk*(Dqk + Dv): the QK^T product (Dqk MACs per score) and the PV
product (Dv MACs per output element). Backward = 2*B*Hq*Lq*Lk*(3*Dqk + 2*Dv): five products
(recomputed QK^T, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q), 2.5x the forward when
Dqk = Dv. Causal masking halves both (the convention of FlashAttention's benchmarks; exact
for Lq = Lk up to the diagonal). Softmax arithmetic is not counted. Query heads Hq may be a
multiple of key/value heads (GQA); the work follows Hq.

is_causal is read from Concrete Inputs at the op's is_causal position (custom_mask_type 1 or 2
for the xFormers-style _efficient_attention ops). Without it (NVTX names, old traces) the op
is counted as not causal, an upper bound, and the result says so; callers that know better
pass causal=True/False.
"""

from __future__ import annotations

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.cost import OpCost, nbytes, numel, short_name
from nsys_llm_explainer.compute.shapes import OpShapes, Uncounted, parse_bool, parse_int
from nsys_llm_explainer.frozen import frozen


@frozen
class Layout:
    q: int  # index of the query argument (key and value follow)
    heads_first: bool  # [B, H, L, D] when True, [B, L, H, D] when False
    causal: int  # index of is_causal (or custom_mask_type when mask_type)
    backward: bool = False
    mask_type: bool = False  # custom_mask_type int instead of an is_causal bool
    cum_seq_q: int | None = None  # varlen: cumulative sequence offsets of the batch
    composite: bool = False


OPS = {
    "scaled_dot_product_attention": Layout(0, True, 5, composite=True),
    "_scaled_dot_product_flash_attention": Layout(0, True, 4, composite=True),
    "_scaled_dot_product_efficient_attention": Layout(0, True, 6, composite=True),
    "_scaled_dot_product_cudnn_attention": Layout(0, True, 6),
    "_scaled_dot_product_flash_attention_for_cpu": Layout(0, True, 4),
    "_flash_attention_forward": Layout(0, False, 8, cum_seq_q=3),
    "_efficient_attention_forward": Layout(0, False, 9, mask_type=True, cum_seq_q=4),
    "_scaled_dot_product_flash_attention_backward": Layout(1, True, 11, True, composite=True),
    "_scaled_dot_product_efficient_attention_backward": Layout(1, True, 11, True, composite=True),
    "_scaled_dot_product_cudnn_attention_backward": Layout(1, True, 14, True),
    "_flash_attention_backward": Layout(1, False, 11, True, cum_seq_q=6),
    "_efficient_attention_backward": Layout(1, False, 14, True, mask_type=True, cum_seq_q=6),
}
NOT_CAUSAL_NOTE = "is_causal not recorded: counted as not causal (an upper bound)"


def _bhld(dims: tuple[int, ...], heads_first: bool) -> tuple[int, int, int, int] | None:
    if len(dims) != 4:
        return None
    b, x, y, d = dims
    return (b, x, y, d) if heads_first else (b, y, x, d)


def _causal(s: OpShapes, lay: Layout, given: bool | None, notes: list[str]) -> bool:
    if given is not None:
        return given
    text = s.arg(lay.causal).value
    if lay.mask_type:
        kind = parse_int(text)  # 0: no mask, 1: causal from the top left, 2: from the bottom right
        if kind in (0, 1, 2):
            return kind != 0
    else:
        flag = parse_bool(text)
        if flag is not None:
            return flag
    notes.append(NOT_CAUSAL_NOTE)
    return False


Dims4 = tuple[int, int, int, int]


def _shapes(
    s: OpShapes, lay: Layout, notes: list[str]
) -> tuple[Dims4, tuple[int, int, int], int] | None:
    """(B, Hq, Lq, Dqk), (Hk, Lk, Dv) and the number of (query, key) pairs per head."""
    q, k, v = s.tensor(lay.q), s.tensor(lay.q + 1), s.tensor(lay.q + 2)
    if q is None or k is None or v is None:
        return None
    cum = s.tensor(lay.cum_seq_q) if lay.cum_seq_q is not None else None
    if cum is not None and len(cum) == 1 and cum[0] >= 2:
        # Variable-length batch: [total, H, D] (flash) or [1, total, H, D] (efficient).
        qq, kk, vv = (x[-3:] for x in (q, k, v))
        if not (len(qq) == len(kk) == len(vv) == 3):
            return None
        batch = cum[0] - 1
        (tq, hq, dqk), (tk, hk, _), (_, _, dv) = qq, kk, vv
        notes.append(
            "variable-length batch: sequences assumed equal length (total_q*total_k/batch pairs; "
            "a lower bound when lengths differ)"
        )
        return (batch, hq, tq, dqk), (hk, tk, dv), tq * tk // batch
    q4, k4, v4 = (_bhld(x, lay.heads_first) for x in (q, k, v))
    if q4 is None or k4 is None or v4 is None:
        return None
    b, hq, lq, dqk = q4
    _, hk, lk, dk = k4
    if dk != dqk or v4[2] != lk:
        return None
    return q4, (hk, lk, v4[3]), b * lq * lk


def attention(
    s: OpShapes, causal: bool | None = None, compute_dtype: str | None = None
) -> OpCost | Uncounted:
    lay = OPS[short_name(s.op)]
    notes: list[str] = []
    parsed = _shapes(s, lay, notes)
    if parsed is None:
        return Uncounted(
            s.op, "query, key and value are not [B, H, L, D] tensors of matching sizes"
        )
    (b, hq, lq, dqk), (hk, lk, dv), pairs = parsed
    if hk == 0 or hq % hk:
        return Uncounted(s.op, f"query heads {hq} are not a multiple of key/value heads {hk}")
    is_causal = _causal(s, lay, causal, notes)
    if is_causal and lq != lk:
        notes.append(
            "causal with Lq != Lk: the unmasked share depends on the mask alignment; counted as 1/2"
        )
    if s.tensor(3) is not None and short_name(s.op) == "scaled_dot_product_attention":
        notes.append("an explicit attn_mask is counted as dense (no skipped blocks)")
    per_pair = 3 * dqk + 2 * dv if lay.backward else dqk + dv
    full = 2 * hq * pairs * per_pair
    flops = full // 2 if is_causal else full
    dtype = s.tensor_dtype(lay.q)
    q_el, k_el, v_el = (numel(s.tensor(lay.q + i) or ()) for i in range(3))
    # Every tensor input is read once (q, k, v, masks; backward adds grad_out, out, logsumexp).
    read = sum(nbytes(d, dt) for d, dt in s.tensors())
    if lay.backward:
        written = (q_el + k_el + v_el) * dtypes.size(dtype)  # grad_q, grad_k, grad_v
        formula = f"2*B*Hq*Lq*Lk*(3*Dqk+2*Dv) = 2*{b}*{hq}*{lq}*{lk}*{per_pair}"
    else:
        written = q_el // dqk * dv * dtypes.size(dtype) if dqk else 0  # the output
        formula = f"2*B*Hq*Lq*Lk*(Dqk+Dv) = 2*{b}*{hq}*{lq}*{lk}*{per_pair}"
    if pairs != b * lq * lk:
        formula = f"2*Hq*pairs*{per_pair} = 2*{hq}*{pairs}*{per_pair}"
    if is_causal:
        formula += " / 2 (causal)"
    return OpCost(
        op=s.op,
        family="attention",
        direction="backward" if lay.backward else "forward",
        flops=flops,
        bytes_read=read,
        bytes_written=written,
        dtype=dtype,
        compute_dtype=compute_dtype or dtypes.peak_class(dtype),
        dtype_source=s.dtype_source,
        formula=formula,
        assumptions=tuple(notes),
        composite=lay.composite,
        extra={"causal": is_causal, "gqa_group": hq // hk, "batch": b, "lq": lq, "lk": lk},
    )
