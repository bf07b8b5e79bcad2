"""Convolutions: conv1d/2d/3d, conv_transpose*, convolution, _convolution,
cudnn_convolution(_transpose) and convolution_backward.

FLOPs = 2 * N * C_out * (C_in / groups) * prod(kernel) * prod(output spatial) for a regular
convolution; a transposed one does the same work per *input* point:
2 * N * C_in * (C_out / groups) * prod(kernel) * prod(input spatial). Stride, padding,
dilation and groups come from Concrete Inputs; when they are missing (NVTX names, old
traces) groups is inferred from the shapes (C_in / weight.size(1)) and the output is assumed
to keep the input's spatial size (stride 1, "same" padding), which is stated.
"""

from __future__ import annotations

import math

from nsys_llm_explainer.compute.cost import OpCost, direction_of, nbytes, short_name
from nsys_llm_explainer.compute.dtypes import peak_class
from nsys_llm_explainer.compute.shapes import (
    OpShapes,
    Uncounted,
    parse_bool,
    parse_int,
    parse_int_list,
)
from nsys_llm_explainer.frozen import frozen

TF32_NOTE = "float32 convolution counted at the TF32 peak: cuDNN's default (allow_tf32=True)"
SAME_NOTE = "stride, padding and dilation not recorded: output assumed the input's spatial size"


@frozen
class Sig:
    """Argument positions of one convolution signature (None: not an argument)."""

    bias: int | None
    stride: int
    padding: int
    dilation: int
    groups: int
    transposed: int | None = None  # index of the bool argument
    output_padding: int | None = None
    allow_tf32: int | None = None
    always_transposed: bool = False
    composite: bool = False


_CONV_N = Sig(bias=2, stride=3, padding=4, dilation=5, groups=6, composite=True)
SIGNATURES = {
    "conv1d": _CONV_N,
    "conv2d": _CONV_N,
    "conv3d": _CONV_N,
    "conv_transpose1d": Sig(
        2, 3, 4, 7, 6, output_padding=5, always_transposed=True, composite=True
    ),
    "conv_transpose2d": Sig(
        2, 3, 4, 7, 6, output_padding=5, always_transposed=True, composite=True
    ),
    "conv_transpose3d": Sig(
        2, 3, 4, 7, 6, output_padding=5, always_transposed=True, composite=True
    ),
    "convolution": Sig(2, 3, 4, 5, 8, transposed=6, output_padding=7, composite=True),
    "_convolution": Sig(
        2, 3, 4, 5, 8, transposed=6, output_padding=7, allow_tf32=12, composite=True
    ),
    "cudnn_convolution": Sig(None, 3, 2, 4, 5, allow_tf32=8),
    "cudnn_convolution_transpose": Sig(
        None, 4, 2, 5, 6, output_padding=3, allow_tf32=9, always_transposed=True
    ),
}


def _per_dim(value: str | None, d: int) -> tuple[int, ...] | None:
    vals = parse_int_list(value)
    if vals is None or len(vals) not in (1, d):
        return None
    return vals * d if len(vals) == 1 else vals


def _sig_for(s: OpShapes, name: str) -> Sig:
    # cudnn_convolution before PyTorch 1.8 took (self, weight, bias, padding, stride, dilation,
    # groups, ...): its third argument is a tensor or None (""), never a ScalarList.
    if name == "cudnn_convolution" and (
        s.arg(2).is_tensor or (s.source == "kineto" and s.arg(2).type_name == "")
    ):
        return Sig(bias=2, stride=4, padding=3, dilation=5, groups=6)
    return SIGNATURES[name]


def _compute(s: OpShapes, sig: Sig | None, dtype: str, notes: list[str]) -> str | None:
    """Peak class: float32 convolutions run as TF32 unless allow_tf32 is recorded False."""
    if dtype != "fp32":
        return peak_class(dtype)
    allow = None
    if sig is not None and sig.allow_tf32 is not None:
        allow = parse_bool(s.arg(sig.allow_tf32).value)
    if allow is False:
        return "fp32"
    if allow is None:
        notes.append(TF32_NOTE)
    return "tf32"


def _padding_mode(text: str | None) -> str | None:
    t = (text or "").strip().strip("'\"")
    return t if t in ("same", "valid") else None


def convolution(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    name = short_name(s.op)
    sig = _sig_for(s, name)
    x, w = s.tensor(0), s.tensor(1)
    if x is None or w is None or len(x) < 3 or len(w) != len(x):
        return Uncounted(
            s.op,
            f"convolution needs input [N, C, *spatial] and a weight of the same rank ({x}, {w})",
        )
    d = len(x) - 2
    n, c_in, spatial = x[0], x[1], x[2:]
    kernel = w[2:]
    notes: list[str] = []
    transposed = sig.always_transposed or bool(
        sig.transposed is not None and parse_bool(s.arg(sig.transposed).value)
    )
    groups = parse_int(s.arg(sig.groups).value)
    if groups is None or groups <= 0:
        if transposed:
            groups = 1
            notes.append("groups not recorded: assumed 1")
        elif w[1] and c_in % w[1] == 0:
            groups = c_in // w[1]
        else:
            return Uncounted(
                s.op, f"input channels {c_in} are not a multiple of weight.size(1) {w[1]}"
            )
    stride = _per_dim(s.arg(sig.stride).value, d)
    dilation = _per_dim(s.arg(sig.dilation).value, d)
    pad_text = s.arg(sig.padding).value
    padding = _per_dim(pad_text, d)
    out_pad = _per_dim(s.arg(sig.output_padding).value, d) if sig.output_padding else None
    if (
        any(v < 1 for v in (stride or ()) + (dilation or ()))
        or any(v < 0 for v in (padding or ()) + (out_pad or ()))
        or groups < 1
        or c_in % groups
    ):
        return Uncounted(
            s.op,
            f"stride {stride}, padding {padding}, dilation {dilation}, groups {groups} "
            "are not valid for this convolution",
        )
    if transposed:
        c_out = w[1] * groups
        if stride is None or padding is None or dilation is None:
            out_sp = spatial
            notes.append(SAME_NOTE)
        else:
            op = out_pad or (0,) * d
            out_sp = tuple(
                (i - 1) * st - 2 * p + dl * (k - 1) + o + 1
                for i, st, p, dl, k, o in zip(
                    spatial, stride, padding, dilation, kernel, op, strict=True
                )
            )
        k_taps, points = math.prod(kernel), math.prod(spatial)
        macs = n * c_in * (c_out // groups) * k_taps * points
        formula = f"2*N*C_in*(C_out/g)*prod(k)*prod(in) = 2*{n}*{c_in}*{c_out // groups}*{k_taps}*{points}"
    else:
        c_out = w[0]
        mode = _padding_mode(pad_text)
        if mode == "valid":
            padding = (0,) * d
        if mode == "same":  # PyTorch allows padding="same" only with stride 1
            out_sp = spatial
        elif stride is None or padding is None or dilation is None:
            out_sp = spatial
            notes.append(SAME_NOTE)
        else:
            out_sp = tuple(
                (i + 2 * p - dl * (k - 1) - 1) // st + 1
                for i, st, p, dl, k in zip(spatial, stride, padding, dilation, kernel, strict=True)
            )
        k_taps, points = math.prod(kernel), math.prod(out_sp)
        macs = n * c_out * (c_in // groups) * k_taps * points
        formula = f"2*N*C_out*(C_in/g)*prod(k)*prod(out) = 2*{n}*{c_out}*{c_in // groups}*{k_taps}*{points}"
    if any(o <= 0 for o in out_sp):
        return Uncounted(s.op, f"the output would be empty (spatial {list(out_sp)})")
    dtype = s.tensor_dtype(0)
    cls = compute_dtype or _compute(s, sig, dtype, notes)
    bias = s.tensor(sig.bias) if sig.bias is not None else None
    reads = (
        nbytes(x, dtype)
        + nbytes(w, s.tensor_dtype(1))
        + (nbytes(bias, s.tensor_dtype(sig.bias)) if bias and sig.bias is not None else 0)
    )
    return OpCost(
        op=s.op,
        family="conv",
        direction=direction_of(s.op),
        flops=2 * macs,
        bytes_read=reads,
        bytes_written=nbytes((n, c_out, *out_sp), dtype),
        dtype=dtype,
        compute_dtype=cls,
        dtype_source=s.dtype_source,
        formula=formula,
        assumptions=tuple(notes),
        composite=sig.composite,
        extra={"groups": groups, "transposed": transposed, "output_spatial": out_sp},
    )


def _bool_list(text: str | None) -> tuple[bool, ...] | None:
    if not text:
        return None
    parts = [parse_bool(p) for p in text.strip().strip("[]").split(",")]
    return tuple(p for p in parts if p is not None) if all(p is not None for p in parts) else None


def convolution_backward(s: OpShapes, compute_dtype: str | None = None) -> OpCost | Uncounted:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost
    one forward convolution; the output sizes are known, so no stride is assumed."""
    go, x, w = s.tensor(0), s.tensor(1), s.tensor(2)
    if go is None or x is None or w is None or not (len(go) == len(x) == len(w) >= 3):
        return Uncounted(s.op, f"needs grad_output, input and weight of one rank ({go}, {x}, {w})")
    notes: list[str] = []
    mask = _bool_list(s.arg(10).value)
    if mask is None or len(mask) != 3:
        mask = (True, True, True)
        notes.append("output_mask not recorded: grad_input, grad_weight and grad_bias all counted")
    transposed = bool(parse_bool(s.arg(7).value))
    groups = parse_int(s.arg(9).value)
    if groups is None or groups <= 0:
        groups = x[1] // w[1] if not transposed and w[1] and x[1] % w[1] == 0 else 1
        groups = max(groups, 1)
    # MACs of the forward conv: every (output point, kernel tap, input channel of the group).
    if transposed:
        fwd = x[0] * x[1] * (go[1] // groups) * math.prod(w[2:]) * math.prod(x[2:])
    else:
        fwd = go[0] * go[1] * (x[1] // groups) * math.prod(w[2:]) * math.prod(go[2:])
    passes = int(mask[0]) + int(mask[1])
    dtype = s.tensor_dtype(0)
    written = (nbytes(x, dtype) if mask[0] else 0) + (nbytes(w, dtype) if mask[1] else 0)
    written += nbytes((go[1],), dtype) if mask[2] else 0
    read = (
        nbytes(go, dtype)
        + (nbytes(w, dtype) if mask[0] else 0)
        + (nbytes(x, dtype) if mask[1] else 0)
    )
    cls = compute_dtype or _compute(s, None, dtype, notes)
    return OpCost(
        op=s.op,
        family="conv",
        direction="backward",
        flops=2 * fwd * passes,
        bytes_read=read,
        bytes_written=written,
        dtype=dtype,
        compute_dtype=cls,
        dtype_source=s.dtype_source,
        formula=f"2*fwd_MACs*{passes} (grad_input {mask[0]}, grad_weight {mask[1]}) = 2*{fwd}*{passes}",
        assumptions=tuple(notes),
    )
