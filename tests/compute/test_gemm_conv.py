"""FLOP and byte formulas of matrix products and convolutions, against hand arithmetic."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute.cost import OpCost
from nsys_llm_explainer.compute.opcost import cost_kineto, cost_nvtx
from nsys_llm_explainer.compute.shapes import Uncounted

FAST = settings(max_examples=150)
BF16, F32 = "c10::BFloat16", "float"


def kin(name: str, dims: list, types: list, concrete: list | None = None, **kw: Any) -> Any:
    args: dict[str, Any] = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    return cost_kineto(name, args, **kw)


def ok(result: OpCost | Uncounted) -> OpCost:
    assert isinstance(result, OpCost), result
    return result


def test_mm():
    c = ok(kin("aten::mm", [[8944, 1024], [1024, 1024]], [BF16, BF16]))
    assert c.flops == 2 * 8944 * 1024 * 1024 == 18_756_927_488
    assert c.bytes_read == (8944 * 1024 + 1024 * 1024) * 2 == 20_414_464
    assert c.bytes_written == 8944 * 1024 * 2 == 18_317_312
    assert (c.family, c.direction, c.compute_dtype, c.dtype_source) == (
        "gemm",
        "forward",
        "bf16",
        "stated",
    )
    assert c.intensity == pytest.approx(18_756_927_488 / (20_414_464 + 18_317_312))
    assert isinstance(kin("aten::mm", [[2, 3], [4, 5]], [BF16, BF16]), Uncounted)


def test_addmm_reads_the_bias_and_does_not_count_its_add():
    c = ok(
        kin(
            "aten::addmm", [[1024], [8944, 1024], [1024, 1024], [], []], [BF16] * 3 + ["Scalar"] * 2
        )
    )
    assert c.flops == 2 * 8944 * 1024 * 1024
    assert c.bytes_read == 20_414_464 + 1024 * 2 == 20_416_512


def test_bmm_and_baddbmm():
    c = ok(kin("aten::bmm", [[4, 64, 128], [4, 128, 32]], ["c10::Half"] * 2))
    assert c.flops == 2 * 4 * 64 * 32 * 128 == 2_097_152
    assert c.bytes_read == (4 * 64 * 128 + 4 * 128 * 32) * 2 == 98_304
    assert c.bytes_written == 4 * 64 * 32 * 2 == 16_384
    b = ok(
        kin(
            "aten::baddbmm",
            [[4, 64, 32], [4, 64, 128], [4, 128, 32], [], []],
            ["c10::Half"] * 3 + ["Scalar"] * 2,
        )
    )
    assert b.flops == 2_097_152 and b.bytes_read == 98_304 + 4 * 64 * 32 * 2
    assert isinstance(kin("aten::bmm", [[4, 64, 128], [3, 128, 32]], [BF16, BF16]), Uncounted)


@pytest.mark.parametrize(
    ("a", "b", "flops", "out"),
    [
        (
            [16, 559, 1024],
            [1024, 2816],
            2 * 16 * 559 * 2816 * 1024,
            [16, 559, 2816],
        ),  # batch x matrix
        ([5], [5], 2 * 5, []),  # dot product
        ([3], [3, 4], 2 * 3 * 4, [4]),  # vector x matrix
        ([2, 3], [3], 2 * 2 * 3, [2]),  # matrix x vector
        ([2, 1, 4, 5], [3, 5, 6], 2 * (2 * 3) * 4 * 6 * 5, [2, 3, 4, 6]),  # batch broadcast
        ([7, 4, 5], [5], 2 * 7 * 4 * 5, [7, 4]),  # batched matrix x vector
    ],
)
def test_matmul_broadcasting(a, b, flops, out):
    c = ok(kin("aten::matmul", [a, b], [F32, F32]))
    n_out = 1
    for d in out:
        n_out *= d
    assert c.flops == flops and c.bytes_written == n_out * 4 and c.composite
    assert any("FP32 (non-tensor)" in n for n in c.assumptions) and c.compute_dtype == "fp32"


def test_matmul_mismatch_and_tf32_override():
    assert isinstance(kin("aten::matmul", [[2, 3], [4, 5]], [F32, F32]), Uncounted)
    assert isinstance(kin("aten::matmul", [[2, 2, 3], [3, 3, 4]], [F32, F32]), Uncounted)
    c = ok(kin("aten::mm", [[2, 3], [3, 4]], [F32, F32], compute_dtype="tf32"))
    assert c.compute_dtype == "tf32" and c.assumptions == ()


def test_linear_with_and_without_bias():
    c = ok(kin("aten::linear", [[16, 559, 1024], [1024, 1024], [1024]], [BF16] * 3))
    assert c.flops == 2 * (16 * 559) * 1024 * 1024 and c.composite
    assert c.bytes_read == (16 * 559 * 1024 + 1024 * 1024 + 1024) * 2 == 20_416_512
    n = ok(kin("aten::linear", [[16, 559, 1024], [2816, 1024], []], [BF16, BF16, ""]))
    assert n.flops == 2 * 8944 * 1024 * 2816 and n.bytes_written == 8944 * 2816 * 2
    assert isinstance(kin("aten::linear", [[4, 100], [64, 99]], [F32, F32]), Uncounted)


def test_scaled_mm_fp8_with_bf16_output():
    e4m3 = "c10::Float8_e4m3fn"
    c = ok(
        kin(
            "aten::_scaled_mm",
            [[128, 256], [256, 512], [], [], [], [], [], []],
            [e4m3, e4m3, F32, F32, "", "", "Scalar", "Scalar"],
            ["", "", "", "", "", "", "15", "False"],
        )
    )
    assert c.flops == 2 * 128 * 512 * 256 == 33_554_432 and c.compute_dtype == "fp8"
    assert c.bytes_read == 128 * 256 + 256 * 512 + 4 + 4 == 163_848  # fp8 operands, fp32 scales
    assert c.bytes_written == 128 * 512 * 2 == 131_072  # out_dtype 15 = bfloat16


def test_gemm_from_nvtx_is_assumed_dtype():
    c = ok(
        cost_nvtx(
            "aten::addmm, seq = 12, op_id = 5, sizes = [[4096], [8, 4096], [4096, 4096]]", "bf16"
        )
    )
    assert c.flops == 2 * 8 * 4096 * 4096 and c.dtype_source == "assumed"
    assert c.bytes_read == (4096 + 8 * 4096 + 4096 * 4096) * 2


CONV2D_ARGS = (
    [[8, 3, 224, 224], [64, 3, 7, 7], [64], [], [], [], []],
    [F32, F32, F32] + ["ScalarList"] * 3 + ["Scalar"],
)


def test_conv2d_with_stride_and_padding():
    c = ok(kin("aten::conv2d", *CONV2D_ARGS, ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"]))
    # out = floor((224 + 2*3 - 1*(7-1) - 1) / 2) + 1 = floor(223/2) + 1 = 112
    assert c.extra["output_spatial"] == (112, 112)
    assert c.flops == 2 * 8 * 64 * 3 * 7 * 7 * 112 * 112 == 1_888_223_232
    assert c.bytes_read == (8 * 3 * 224 * 224 + 64 * 3 * 49 + 64) * 4 == 4_854_784
    assert c.bytes_written == 8 * 64 * 112 * 112 * 4 == 25_690_112
    assert c.compute_dtype == "tf32" and any("allow_tf32=True" in n for n in c.assumptions)
    assert c.composite and c.family == "conv"


def test_depthwise_conv1d_conv3d():
    dw = ok(
        kin(
            "aten::conv2d",
            [[1, 32, 56, 56], [32, 1, 3, 3], [], [], [], [], []],
            [BF16, BF16, ""] + ["ScalarList"] * 3 + ["Scalar"],
            ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "32"],
        )
    )
    assert dw.flops == 2 * 1 * 32 * 1 * 9 * 56 * 56 == 1_806_336 and dw.extra["groups"] == 32
    c1 = ok(
        kin(
            "aten::conv1d",
            [[2, 4, 10], [6, 4, 3], [], [], [], [], []],
            [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar"],
            ["", "", "", "[1]", "[0]", "[1]", "1"],
        )
    )
    assert c1.flops == 2 * 2 * 6 * 4 * 3 * 8 == 2304  # out length 10 - 3 + 1 = 8
    c3 = ok(
        kin(
            "aten::conv3d",
            [[1, 2, 4, 4, 4], [3, 2, 2, 2, 2], [], [], [], [], []],
            [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar"],
            ["", "", "", "[2, 2, 2]", "[0, 0, 0]", "[1, 1, 1]", "1"],
        )
    )
    assert c3.flops == 2 * 1 * 3 * 2 * 8 * 8 == 768  # out 2x2x2, kernel 8 taps


def test_conv_from_nvtx_infers_groups_and_states_the_same_size_assumption():
    c = ok(
        cost_nvtx(
            "aten::convolution, seq = 3, sizes = [[1, 64, 56, 56], [128, 64, 3, 3], [], [], [], [], [], [], []]",
            "fp16",
        )
    )
    assert c.flops == 2 * 1 * 128 * 64 * 9 * 56 * 56 == 462_422_016
    assert any("spatial size" in n for n in c.assumptions) and c.extra["groups"] == 1
    g = ok(
        cost_nvtx(
            "aten::cudnn_convolution, sizes = [[1, 64, 8, 8], [64, 16, 3, 3], [], [], [], []]",
            "fp16",
        )
    )
    assert g.extra["groups"] == 4 and g.flops == 2 * 64 * 16 * 9 * 64


def test_transposed_convolution():
    types = [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar", "ScalarList"]
    c = ok(
        kin(
            "aten::conv_transpose2d",
            [[1, 16, 8, 8], [16, 8, 4, 4], [], [], [], [], [], []],
            types,
            ["", "", "", "[2, 2]", "[1, 1]", "[0, 0]", "1", "[1, 1]"],
        )
    )
    # out = (8-1)*2 - 2*1 + 1*(4-1) + 0 + 1 = 16; work per input point: C_in * C_out/g * k
    assert c.extra["output_spatial"] == (16, 16)
    assert c.flops == 2 * 1 * 16 * 8 * 16 * 64 == 262_144
    assert c.bytes_written == 1 * 8 * 16 * 16 * 4


def test_convolution_and_cudnn_signatures():
    conv = ok(
        kin(
            "aten::_convolution",
            [[8, 3, 224, 224], [64, 3, 7, 7], [64]] + [[]] * 10,
            [F32] * 3 + ["ScalarList"] * 3 + ["Scalar", "ScalarList"] + ["Scalar"] * 5,
            [
                "",
                "",
                "",
                "[2, 2]",
                "[3, 3]",
                "[1, 1]",
                "False",
                "[0, 0]",
                "1",
                "False",
                "False",
                "True",
                "False",
            ],
        )
    )
    assert conv.flops == 1_888_223_232 and conv.compute_dtype == "fp32"  # allow_tf32=False
    new = ok(
        kin(
            "aten::cudnn_convolution",
            [[8, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 7,
            [F32, F32] + ["ScalarList"] * 3 + ["Scalar"] * 4,
            ["", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
        )
    )
    assert new.flops == 1_888_223_232 and not new.composite
    old = ok(
        kin(
            "aten::cudnn_convolution",
            [[8, 3, 224, 224], [64, 3, 7, 7], [64]] + [[]] * 6,
            [F32] * 3 + ["ScalarList"] * 3 + ["Scalar"] * 3,
            ["", "", "", "[3, 3]", "[2, 2]", "[1, 1]", "1", "False", "False"],
        )
    )
    assert old.flops == 1_888_223_232 and old.bytes_read == 4_854_784  # bias at index 2


def test_convolution_backward():
    dims = [[8, 64, 112, 112], [8, 3, 224, 224], [64, 3, 7, 7]] + [[]] * 8
    types = [F32] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    values = [
        "",
        "",
        "",
        "[64]",
        "[2, 2]",
        "[3, 3]",
        "[1, 1]",
        "False",
        "[0, 0]",
        "1",
        "[True, True, False]",
    ]
    c = ok(kin("aten::convolution_backward", dims, types, values))
    fwd_macs = 8 * 64 * 3 * 49 * 112 * 112  # = 944,111,616
    assert c.flops == 2 * fwd_macs * 2 == 3_776_446_464 and c.direction == "backward"
    assert c.bytes_written == (8 * 3 * 224 * 224 + 64 * 3 * 49) * 4  # grad_input, grad_weight
    only_input = ok(
        kin("aten::convolution_backward", dims, types, values[:-1] + ["[True, False, False]"])
    )
    assert only_input.flops == 2 * fwd_macs


@FAST
@given(m=st.integers(1, 512), k=st.integers(1, 512), n=st.integers(1, 512), scale=st.integers(1, 8))
def test_gemm_flops_scale_linearly_in_batch_and_bytes_cover_the_output(m, k, n, scale):
    one = ok(kin("aten::matmul", [[3, m, k], [k, n]], [BF16, BF16]))
    many = ok(kin("aten::matmul", [[3 * scale, m, k], [k, n]], [BF16, BF16]))
    assert many.flops == scale * one.flops == scale * 2 * 3 * m * n * k
    assert one.bytes >= one.bytes_written == 3 * m * n * 2
    lin = ok(kin("aten::linear", [[3, m, k], [n, k], []], [BF16, BF16, ""]))
    mm = ok(kin("aten::mm", [[3 * m, k], [k, n]], [BF16, BF16]))
    assert lin.flops == mm.flops == one.flops and lin.bytes == mm.bytes
    wide = ok(kin("aten::mm", [[3 * m, k], [k, n]], [F32, F32]))
    assert wide.flops == mm.flops and wide.bytes == 2 * mm.bytes  # fp32 moves twice the bytes


@FAST
@given(
    n=st.integers(1, 4), c=st.integers(1, 16), hw=st.integers(3, 40), o=st.integers(1, 16),
    k=st.sampled_from([1, 3, 5]), stride=st.integers(1, 3), scale=st.integers(1, 4),
)  # fmt: skip
def test_conv_flops_scale_linearly_in_batch(n, c, hw, o, k, stride, scale):
    def conv(batch: int) -> OpCost:
        dims = [[batch, c, hw, hw], [o, c, k, k], [], [], [], [], []]
        types = [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar"]
        values = ["", "", "", f"[{stride}, {stride}]", f"[{k // 2}, {k // 2}]", "[1, 1]", "1"]
        return ok(kin("aten::conv2d", dims, types, values))

    one, many = conv(n), conv(n * scale)
    assert many.flops == scale * one.flops
    out = (hw + 2 * (k // 2) - k) // stride + 1
    assert one.flops == 2 * n * o * c * k * k * out * out
    assert one.bytes >= one.bytes_written == n * o * out * out * 4


def test_int_mm_and_vector_products():
    i8 = ok(kin("aten::_int_mm", [[64, 128], [128, 32]], ["signed char", "signed char"]))
    assert i8.flops == 2 * 64 * 32 * 128 == 524_288 and i8.compute_dtype == "int8"
    assert i8.bytes_read == 64 * 128 + 128 * 32 and i8.bytes_written == 64 * 32 * 4  # int32 out
    mv = ok(kin("aten::mv", [[4096, 1024], [1024]], [BF16, BF16]))
    assert mv.flops == 2 * 4096 * 1024 and mv.bytes_written == 4096 * 2 and not mv.composite


def test_invalid_convolution_parameters_are_uncounted():
    dims = [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []]
    types = [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar"]
    for stride, pad, groups in (
        ("[0, 0]", "[0, 0]", "1"),
        ("[1, 1]", "[-1, 0]", "1"),
        ("[1, 1]", "[0, 0]", "2"),
    ):
        r = kin("aten::conv2d", dims, types, ["", "", "", stride, pad, "[1, 1]", groups])
        assert isinstance(r, Uncounted) and "not valid" in r.reason
