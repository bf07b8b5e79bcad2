"""Attention FLOPs (causal and not, GQA, varlen, backward) and bytes-only operators, against
hand arithmetic, plus consistency of nested operators on a real Kineto trace."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute.cost import OpCost
from nsys_llm_explainer.compute.opcost import cost_kineto, cost_nvtx
from nsys_llm_explainer.compute.shapes import Uncounted
from tests.compute.test_gemm_conv import BF16, F32, kin, ok
from tests.compute.test_shapes import kineto_events

FAST = settings(max_examples=150)
QKV = [[16, 16, 559, 64]] * 3
SDPA_TYPES = [BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", "Scalar"]


def sdpa(causal: str) -> OpCost:
    values = ["", "", "", "", "0.", causal, "0.125", "False"]
    return ok(kin("aten::scaled_dot_product_attention", QKV + [[]] * 5, SDPA_TYPES, values))


def test_sdpa_causal_halves_the_work():
    full = sdpa("False")
    # QK^T and PV: 2*B*Hq*Lq*Lk*(Dqk+Dv) = 2*16*16*559*559*(64+64)
    assert full.flops == 2 * 16 * 16 * 559 * 559 * 128 == 20_478_754_816
    causal = sdpa("True")
    assert causal.flops == full.flops // 2 == 10_239_377_408 and causal.extra["causal"]
    assert (
        causal.bytes_read == 3 * 16 * 16 * 559 * 64 * 2
        and causal.bytes_written == 16 * 16 * 559 * 64 * 2
    )
    assert causal.composite and causal.family == "attention" and causal.assumptions == ()


def test_flash_forward_reads_its_b_l_h_d_layout():
    values = ["", "", "", "", "", "559", "559", "0.", "True", "False", "0.125", "", "", "", ""]
    c = ok(
        kin(
            "aten::_flash_attention_forward",
            [[16, 559, 16, 64]] * 3 + [[]] * 12,
            [BF16] * 3 + [""] * 12,
            values,
        )
    )
    assert c.flops == 10_239_377_408 and not c.composite


def test_gqa_uses_query_heads():
    dims = [[2, 32, 128, 128], [2, 8, 1024, 128], [2, 8, 1024, 128], [], [], []]
    c = ok(
        kin(
            "aten::_scaled_dot_product_flash_attention",
            dims,
            [BF16] * 3 + ["Scalar"] * 3,
            ["", "", "", "0.", "False", "False"],
        )
    )
    assert c.flops == 2 * 2 * 32 * 128 * 1024 * (128 + 128) == 4_294_967_296
    assert c.bytes_read == (2 * 32 * 128 * 128 + 2 * 2 * 8 * 1024 * 128) * 2 == 10_485_760
    assert c.bytes_written == 2 * 32 * 128 * 128 * 2 and c.extra["gqa_group"] == 4
    bad = kin(
        "aten::_scaled_dot_product_flash_attention",
        [[2, 6, 8, 64], [2, 4, 8, 64], [2, 4, 8, 64]],
        [BF16] * 3,
    )
    assert isinstance(bad, Uncounted)


def test_flash_backward_is_two_and_a_half_forwards():
    dims = [[1, 8, 256, 64]] * 6 + [[]] * 8
    values = [""] * 10 + ["0.", "False", "", ""]
    back = ok(
        kin(
            "aten::_scaled_dot_product_flash_attention_backward",
            dims,
            [BF16] * 5 + [F32] + [""] * 8,
            values,
        )
    )
    # five products: 2*B*H*Lq*Lk*(3*Dqk + 2*Dv) = 2*8*256*256*(192+128)
    assert back.flops == 2 * 8 * 256 * 256 * 320 == 335_544_320 and back.direction == "backward"
    fwd = 2 * 8 * 256 * 256 * 128
    assert back.flops / fwd == 2.5
    assert back.bytes_written == 3 * 8 * 256 * 64 * 2  # grad q, k, v


def test_varlen_flash_assumes_equal_lengths():
    dims = [[300, 8, 64]] * 3 + [[4], [4], [], [], [], [], []]
    types = [BF16] * 3 + ["int", "int"] + ["Scalar"] * 5
    values = [""] * 5 + ["100", "100", "0.", "False", "False"]
    c = ok(kin("aten::_flash_attention_forward", dims, types, values))
    # 3 sequences (cum_seq has 4 offsets), 300 tokens: 300*300/3 = 30,000 (q, k) pairs per head
    assert c.flops == 2 * 8 * 30_000 * 128 == 61_440_000
    assert any("equal length" in n for n in c.assumptions)


def test_efficient_attention_mask_type_and_nvtx_defaults():
    dims = [[1, 512, 8, 64]] * 3 + [[]] * 8
    causal = ok(
        kin(
            "aten::_efficient_attention_forward",
            dims,
            [BF16] * 3 + [""] * 8,
            [""] * 9 + ["1", "False"],
        )
    )
    plain = ok(
        kin(
            "aten::_efficient_attention_forward",
            dims,
            [BF16] * 3 + [""] * 8,
            [""] * 9 + ["0", "False"],
        )
    )
    assert plain.flops == 2 * 8 * 512 * 512 * 128 == 2 * causal.flops
    name = (
        "aten::_scaled_dot_product_flash_attention, seq = 4, "
        "sizes = [[1, 8, 512, 64], [1, 8, 512, 64], [1, 8, 512, 64], [], [], [], []]"
    )
    unknown = ok(cost_nvtx(name, "bf16"))
    assert unknown.flops == plain.flops and "not causal (an upper bound)" in unknown.assumptions[0]
    told = ok(cost_nvtx(name, "bf16", causal=True))
    assert told.flops == causal.flops and told.assumptions == ()


@FAST
@given(
    b=st.integers(1, 8), h=st.sampled_from([1, 2, 8]), group=st.sampled_from([1, 2, 4]),
    lq=st.integers(1, 2048), lk=st.integers(1, 2048), d=st.sampled_from([32, 64, 128]),
    scale=st.integers(1, 5),
)  # fmt: skip
def test_attention_properties(b, h, group, lq, lk, d, scale):
    def run(batch: int, causal: bool) -> OpCost:
        dims = [[batch, h * group, lq, d], [batch, h, lk, d], [batch, h, lk, d], [], [], []]
        values = ["", "", "", "0.", str(causal), "False"]
        return ok(
            kin(
                "aten::_scaled_dot_product_flash_attention",
                dims,
                [BF16] * 3 + ["Scalar"] * 3,
                values,
            )
        )

    full = run(b, False)
    assert full.flops == 2 * b * h * group * lq * lk * 2 * d
    assert run(b * scale, False).flops == scale * full.flops
    assert run(b, True).flops == full.flops // 2
    assert full.bytes >= full.bytes_written == b * h * group * lq * d * 2


def test_elementwise_broadcast_inplace_and_comparisons():
    silu = ok(kin("aten::silu", [[16, 559, 2816]], [BF16]))
    assert (
        silu.bytes_read == silu.bytes_written == 16 * 559 * 2816 * 2 == 50_372_608
        and silu.flops == 0
    )
    add = ok(kin("aten::add", [[16, 559, 1], [], []], [F32, "double", "Scalar"], ["", "", "1"]))
    assert (
        add.bytes_read == 16 * 559 * 4 + 8 and add.bytes_written == 16 * 559 * 4
    )  # 0-dim double read
    bcast = ok(kin("aten::mul", [[4, 1, 8], [3, 1]], [BF16, BF16]))
    assert bcast.bytes_written == 4 * 3 * 8 * 2  # broadcast to [4, 3, 8]
    inplace = ok(kin("aten::add_", [[4096], [4096], []], [F32, F32, "Scalar"]))
    assert inplace.bytes_read == 2 * 4096 * 4 and inplace.bytes_written == 4096 * 4
    eq = ok(kin("aten::eq", [[16, 559], []], ["long int", "Scalar"], ["", "1"]))
    assert eq.bytes_written == 16 * 559 * 1 and eq.dtype == "bool"
    assert isinstance(kin("aten::mul", [[4, 2], [3]], [BF16, BF16]), Uncounted)


def test_reductions_softmax_norms():
    mean = ok(
        kin(
            "aten::mean",
            [[16, 559, 1024], [], [], []],
            [F32, "ScalarList", "Scalar", ""],
            ["", "[-1]", "True", ""],
        )
    )
    assert mean.bytes_read == 16 * 559 * 1024 * 4 and mean.bytes_written == 16 * 559 * 1 * 4
    total = ok(
        kin("aten::sum", [[6, 65536], [], [], []], ["int", "", "Scalar", ""], ["", "", "False", ""])
    )
    assert total.bytes_written == 4 and total.assumptions == ()  # dim=None reduces everything
    old = ok(kin("aten::mean", [[4096], [], [], []], [F32, "", "Scalar", ""]))
    assert old.bytes_written == 4 and "lower bound" in old.assumptions[0]  # no Concrete Inputs
    soft = ok(
        kin(
            "aten::_softmax",
            [[4, 8, 128, 128], [], []],
            ["c10::Half", "Scalar", "Scalar"],
            ["", "-1", "True"],
        )
    )
    assert soft.bytes_read == 4 * 8 * 128 * 128 * 2 and soft.bytes_written == 4 * 8 * 128 * 128 * 4
    ln = ok(
        kin(
            "aten::native_layer_norm",
            [[8, 512, 768], [], [768], [768], []],
            [BF16, "ScalarList", BF16, BF16, "Scalar"],
            ["", "[768]", "", "", "1e-05"],
        )
    )
    assert ln.bytes_read == (8 * 512 * 768 + 768 + 768) * 2
    assert ln.bytes_written == 8 * 512 * 768 * 2 + 2 * (8 * 512) * 4  # output + fp32 mean, rstd


def test_embedding_reads_only_the_looked_up_rows():
    e = ok(
        kin(
            "aten::embedding",
            [[151936, 1024], [16, 559], [], [], []],
            [BF16, "long int", "Scalar", "Scalar", "Scalar"],
            ["", "", "-1", "False", "False"],
        )
    )
    assert e.bytes_read == 16 * 559 * 1024 * 2 + 16 * 559 * 8 == 18_388_864
    assert e.bytes_written == 16 * 559 * 1024 * 2 == 18_317_312 and e.composite
    back = ok(
        kin(
            "aten::embedding_dense_backward",
            [[16, 559, 1024], [16, 559], [], [], []],
            [BF16, "long int", "Scalar", "Scalar", "Scalar"],
            ["", "", "151936", "-1", "False"],
        )
    )
    assert back.bytes_written == 151936 * 1024 * 2


def test_copies_views_factories_and_uncounted():
    cast = ok(
        kin(
            "aten::_to_copy",
            [[1, 1, 559], [], [], [], [], [], []],
            ["long int", "Scalar"] + [""] * 3 + ["Scalar", ""],
            ["", "6", "", "", "", "False", ""],
        )
    )
    assert (cast.bytes_read, cast.bytes_written) == (559 * 8, 559 * 4)  # int64 -> float32 (code 6)
    copy = ok(kin("aten::copy_", [[10], [10], []], [BF16, F32, "Scalar"]))
    assert (copy.bytes_read, copy.bytes_written) == (40, 20)
    view = ok(kin("aten::view", [[16, 559], []], ["long int", "ScalarList"], ["", "[-1]"]))
    assert view.bytes == 0 and view.family == "view"
    zeros = ok(
        kin(
            "aten::zeros",
            [[]] * 5,
            ["ScalarList", "Scalar", "", "", ""],
            ["[2, 3]", "6", "", "", ""],
        )
    )
    assert zeros.bytes_written == 2 * 3 * 4 and zeros.bytes_read == 0
    cat = ok(
        kin("aten::cat", [[[1, 559, 32], [1, 559, 32]], []], ["TensorList", "Scalar"], ["", "-1"])
    )
    assert cat.bytes_read == cat.bytes_written == 2 * 559 * 32 * 2 and cat.dtype_source == "assumed"
    assert "no FLOP or byte formula" in kin("aten::frobnicate", [[2]], [F32]).reason
    assert "autograd node" in cost_kineto("MmBackward0", {"Input Dims": [[2, 2]]}).reason
    assert (
        "autograd node"
        in cost_kineto("autograd::engine::evaluate_function: MmBackward0", {}).reason
    )


def _children(events: list[dict]) -> dict[int, list[dict]]:
    """cpu_op events by parent: the innermost enclosing event on the same thread."""
    ops = sorted(
        (e for e in events if e.get("cat") == "cpu_op" and "dur" in e),
        key=lambda e: (e["tid"], e["ts"], -e["dur"]),
    )
    out: dict[int, list[dict]] = defaultdict(list)
    stack: list[dict] = []
    for e in ops:
        while stack and (
            stack[-1]["tid"] != e["tid"] or e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]
        ):
            stack.pop()
        if stack:
            out[id(stack[-1])].append(e)
        stack.append(e)
    return out


def test_composite_ops_match_their_children_on_the_real_qwen_trace():
    events = kineto_events("hf_qwen1.5_0.5b_h100.json.gz")
    children = _children(events)
    checked = defaultdict(int)
    for e in events:
        if e.get("cat") != "cpu_op" or e["name"] not in (
            "aten::linear",
            "aten::matmul",
            "aten::scaled_dot_product_attention",
        ):
            continue
        outer = ok(cost_kineto(e["name"], e["args"]))
        assert outer.composite
        costs = [cost_kineto(c["name"], c["args"]) for c in children[id(e)]]
        inner = [c for c in costs if isinstance(c, OpCost) and c.flops > 0]
        assert len(inner) == 1, (e["name"], [c.op for c in inner])
        assert inner[0].flops == outer.flops, e["name"]
        checked[e["name"]] += 1
    assert checked["aten::linear"] == 168 and checked["aten::scaled_dot_product_attention"] == 24
    total = sum(
        c.flops
        for e in events
        if e.get("cat") == "cpu_op"
        and isinstance(c := cost_kineto(e["name"], e["args"]), OpCost)
        and not c.composite
    )
    # one forward over 16 x 559 tokens: 24 layers x (4 attention + 3 MLP) projections, attention
    per_token_mm = 24 * (4 * 1024 * 1024 + 3 * 1024 * 2816) * 2
    attention = 24 * 2 * 16 * 16 * 559 * 559 * 128 // 2
    assert total == pytest.approx(16 * 559 * per_token_mm + attention, rel=1e-3)


def test_efficient_sdpa_and_flash_backward_layouts():
    dims = [[2, 4, 100, 64]] * 3 + [[], [], [], [], []]
    values = [
        "",
        "",
        "",
        "",
        "True",
        "0.",
        "True",
        "0.125",
    ]  # (q, k, v, attn_bias, log_sumexp, dropout, is_causal, scale)
    eff = ok(
        kin(
            "aten::_scaled_dot_product_efficient_attention",
            dims,
            [BF16] * 3 + [""] + ["Scalar"] * 4,
            values,
        )
    )
    assert eff.flops == 2 * 2 * 4 * 100 * 100 * 128 // 2 == 10_240_000 and eff.composite
    # _flash_attention_backward(grad_out, q, k, v, out, logsumexp, ...): [B, L, H, D] tensors
    fb_dims = [[2, 100, 4, 64]] * 5 + [[2, 4, 100]] + [[]] * 8
    fb_values = [""] * 10 + ["0.", "True", "", ""]
    fb = ok(
        kin("aten::_flash_attention_backward", fb_dims, [BF16] * 5 + [F32] + [""] * 8, fb_values)
    )
    assert fb.flops == 2 * 2 * 4 * 100 * 100 * (3 * 64 + 2 * 64) // 2 == 25_600_000
    assert (
        fb.bytes_read == 5 * 2 * 100 * 4 * 64 * 2 + 2 * 4 * 100 * 4
    )  # five bf16 tensors, fp32 lse
