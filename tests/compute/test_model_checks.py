"""Model FLOPs that follow what the step ran (the LM head for the tokens whose logits it
computed) and the plausibility warnings of model_utilization: figures above 100% and an HFU
below the model's FLOPs. Expected numbers by hand from the tiny config below."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute import model_flops as mf
from nsys_llm_explainer.compute.model_flops import parse_model_config
from nsys_llm_explainer.compute.model_report import (
    PidGpus,
    StepContext,
    StepShapes,
    phase_rows,
    phase_warnings,
    step_row,
)
from nsys_llm_explainer.metrics.model_utilization import STEP_COLUMNS
from tests.compute.test_nvtx_metric import nvtx_trace
from tests.conftest import analyze, ok, run_cli
from tests.fixtures.kineto.builder import KinetoBuilder

H100_BF16 = 989.5e12
NVTX_GPU_NS = 60_000  # nvtx_trace(): each step's kernels from 10 us to 70 us into its range
BF16 = "c10::BFloat16"
# hidden 512, one layer, 8 heads of 64, MLP 1024 (gated: gate, up, down), vocabulary 32,000
CFG = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 1, "num_attention_heads": 8,
       "num_key_value_heads": 8, "intermediate_size": 1024, "vocab_size": 32000, "tie_word_embeddings": True}
B, S, H, MLP, V = 4, 64, 512, 1024, 32000
T = B * S  # 256 tokens
BODY = 4 * H * H + 3 * H * MLP  # 2,621,440 weights in products besides the head
HEAD = V * H  # 16,384,000
ATTN = 2 * 1 * 8 * (64 + 64) * S  # 131,072 FLOPs per token attending 64 keys
CAUSAL = ATTN // 2  # a causal prefill attends half the keys per token on average
STEP_NS = 20_000


def gpu_window(calls: int) -> int:
    """A prefill() step's own GPU window: its kernels start 2.5 us apart from 30 us on and run
    2 us each."""
    return 2_500 * (calls - 1) + 2_000


CALLS = 9  # prefill()'s operator calls without an LM head
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_kernel"


def prefill(path: Path, head: tuple[int, int] | None) -> Path:
    """One ProfilerStep: the embedding of [4, 64], q/k/v/o, gate/up, down and causal flash
    attention, each launching one kernel; `head` = (rows, output features) of an LM-head mm."""
    k = KinetoBuilder()
    k.top["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    k.user("ProfilerStep#2", 0, STEP_NS)
    calls = [("aten::embedding", [[V, H], [B, S], [], [], []], [BF16, "long int", "Scalar", "Scalar", "Scalar"])]
    calls += [("aten::mm", [[T, H], [H, H]], [BF16, BF16])] * 4
    calls += [("aten::mm", [[T, H], [H, MLP]], [BF16, BF16])] * 2 + [("aten::mm", [[T, MLP], [MLP, H]], [BF16, BF16])]
    q = [B, S, 8, 64]
    calls.append(("aten::_flash_attention_forward", [q, q, q] + [[]] * 12,
                  [BF16] * 3 + ["", ""] + ["Scalar"] * 5 + [""] * 5))
    if head:
        calls.append(("aten::mm", [[head[0], H], [H, head[1]]], [BF16, BF16]))
    for i, (name, dims, types) in enumerate(calls):
        t = 1_000 + 1_000 * i
        op = k.op(name, t, t + 800, dims=dims, types=types)
        if name == "aten::_flash_attention_forward":
            op["args"]["Concrete Inputs"] = ["", "", "", "", "", str(S), str(S), "0.0", "True", "False"] + [""] * 5
        k.runtime("cudaLaunchKernel", t + 100, t + 200, corr=i + 1)
        kernel = GEMM if name == "aten::mm" else f"void some_kernel_{i}<c10::BFloat16>(int)"
        k.kernel(kernel, 30_000 + 2_500 * i, 30_000 + 2_500 * i + 2_000, corr=i + 1)
    return k.write(path)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(CFG), encoding="utf-8")
    return path


def test_step_flops_and_vocab_dims_by_hand() -> None:
    c = parse_model_config(CFG)
    assert mf.param_counts(c).matmul_active == BODY + HEAD == 19_005_440
    assert mf.step_flops(c, T, S) == T * (2 * (BODY + HEAD) + ATTN)  # head for every token
    assert mf.step_flops(c, T, S, 0) == T * (2 * BODY + ATTN) == 1_375_731_712
    assert mf.step_flops(c, T, S, B) == 1_375_731_712 + B * 2 * HEAD == 1_506_803_712
    assert mf.step_flops(c, T, S, 0, training=True) == 3 * 1_375_731_712
    # causal: half the attention, in one place for MFU, HFU and the per-operator FLOPs
    assert mf.step_flops(c, T, S, 0, causal=True) == T * (2 * BODY + CAUSAL) == 1_358_954_496
    assert mf.step_flops(c, T, S, 0, training=True, causal=True) == 3 * 1_358_954_496
    assert mf.is_vocab_dim(32000, V) and mf.is_vocab_dim(32064, V)  # padded to 64
    assert not mf.is_vocab_dim(32128, V) and not mf.is_vocab_dim(31999, V)
    # a tensor-parallel shard is not recognised: 32,000 padded to 32,768 over 8 GPUs is 4,096,
    # Llama-2-7B's hidden size
    assert not mf.is_vocab_dim(4096, V) and not mf.is_vocab_dim(16000, V)
    assert not mf.is_vocab_dim(40, 32) and mf.is_vocab_dim(32, 32)  # small vocabularies: no slack


@pytest.mark.parametrize(
    "head, flops, says",
    [
        # Qwen2Model-like: no product has the vocabulary dimension; the others hold 2 x BODY x T
        (None, T * (2 * BODY + CAUSAL), "left out: no matrix product of the step has the vocabulary dimension 32,000"),
        # generate keeping the last position's logits: the head runs for B = 4 rows
        ((B, V), T * (2 * BODY + CAUSAL) + B * 2 * HEAD, "counted for 4 of 256 tokens"),
        ((T, V), T * (2 * (BODY + HEAD) + CAUSAL),
         "counted for every token: the step's LM-head products have 256 rows"),
        ((T, V + 64), T * (2 * (BODY + HEAD) + CAUSAL), "counted for every token"),  # vocabulary padded to 64
    ],
)
def test_lm_head_counts_for_the_tokens_whose_logits_the_step_computed(tmp_path, config, head, flops, says) -> None:
    report = analyze(prefill(tmp_path / "t.json", head), model_config=str(config))
    mu = ok(report, "model_utilization")
    (s,) = mu["steps"]
    assert (s["kind"], s["tokens"], s["model_flops"]) == ("prefill", T, flops)
    assert s["flops_per_token"] == pytest.approx(flops / T)
    window = gpu_window(CALLS + (1 if head else 0))
    assert s["window_ns"] == window
    assert s["mfu_pct"] == pytest.approx(100 * flops / (window * 1e-9 * H100_BF16), abs=0.006)
    assert says in s["head_from"]
    assert any(line.startswith("LM head: ") and says in line for line in mu["phases"][0]["inputs"])
    # measured: the products that ran and causal attention (half of T x ATTN)
    measured = 2 * T * BODY + (2 * head[0] * H * head[1] if head else 0) + T * ATTN // 2
    assert s["measured_flops"] == measured
    assert mu["phases"][0]["warnings"] == []  # HFU matches the model's work
    # Causal attention counted one way: where the step ran exactly the model's products (the
    # head for every token it counts, or none), MFU and HFU are the same figure, never MFU above.
    if head is None or head[0] == T:
        assert s["hfu_pct"] == s["mfu_pct"] or head == (T, V + 64)
    assert s["hfu_pct"] >= s["mfu_pct"] or head == (T, V + 64)  # padded vocabulary: HFU counts the pad
    # PaLM's convention is named beside the figure, with what it would add.
    assert f"PaLM's convention counts all of them: {ATTN - CAUSAL:,} FLOPs per token more" in s["flops_from"]


def test_hfu_below_the_model_flops_is_flagged(tmp_path, config) -> None:
    # --tokens-per-step 512 claims twice the tokens the step embedded: the recorded products
    # cannot hold the model's work, so the head counts too (assumed). MFU 89.6% over the step's
    # 22 us of own GPU work: below 100%.
    report = analyze(prefill(tmp_path / "t.json", None), model_config=str(config), tokens_per_step=512)
    mu = ok(report, "model_utilization")
    (s,) = mu["steps"]
    model = 512 * (2 * (BODY + HEAD) + CAUSAL)  # causal attention computes half
    assert s["model_flops"] == model == 19_495_124_992
    assert s["mfu_pct"] == pytest.approx(100 * model / (gpu_window(CALLS) * 1e-9 * H100_BF16), abs=0.006)
    assert "assumed" in s["head_from"]
    measured = 2 * T * BODY + T * ATTN // 2  # 1,358,954,496
    (w,) = mu["phases"][0]["warnings"]
    assert f"compute {measured / 1e9:,.1f} GFLOP, {100 * (1 - measured / model):.0f}% less" in w
    assert "HFU" in w and "below MFU" in w and "cover 100% of the kernel time" in w
    assert f"model_utilization: {w}" in report.warnings


def _rows(fpt: float, tokens: int, latencies: list[int], assumed: str = "") -> tuple[list, list, StepContext]:
    sc = StepContext(None, None, fpt, tokens, "bf16", "bf16", "unknown",
                     {1: PidGpus((0,), H100_BF16, 3350e9, "H100 SXM5 80GB (table)", assumed)})
    empty = StepShapes(None, None, 0, None, None, False, 0.0)
    rows = [step_row(sc, {"step": i, "phase": "step", "pid": 1, "latency_ns": t}, empty)
            for i, t in enumerate(latencies)]
    phases = phase_rows(pd.DataFrame(rows, columns=list(STEP_COLUMNS)), sc)
    return rows, phases, sc


@given(
    fpt=st.floats(min_value=1e6, max_value=1e12),
    tokens=st.integers(min_value=1, max_value=100_000),
    latencies=st.lists(st.integers(min_value=10_000, max_value=10**9), min_size=1, max_size=6),
)
@settings(max_examples=300)
def test_mfu_above_100_percent_is_always_a_warning(fpt: float, tokens: int, latencies: list[int]) -> None:
    per_step = [100 * fpt * tokens / (t * 1e-9 * H100_BF16) for t in latencies]
    whole = 100 * fpt * tokens * len(latencies) / (sum(latencies) * 1e-9 * H100_BF16)
    assume(all(abs(v - 110) > 0.01 for v in [*per_step, whole]))  # away from rounding at the line
    rows, (phase,), sc = _rows(fpt, tokens, latencies)
    warnings = phase_warnings(phase, rows, sc)
    over = max([*per_step, whole]) > 110
    assert bool(warnings) == over
    if over:
        (w,) = warnings
        assert w.startswith("phase 'step': MFU ") and "above 100% by more than the 10% tolerance" in w
        assert "tokens per step (--tokens-per-step)" in w and "FLOPs per token (--model-flops-per-token)" in w
        assert "the bf16 dense peak (989.5 TFLOP/s per GPU)" in w and "the GPU count (1 per step)" in w


def test_a_warning_names_an_assumed_peak() -> None:
    # 1.2e9 FLOPs x 4,000 tokens in 29.35 ms on an assumed A100's 19.5 TFLOP/s FP32: 838.68%
    sc = StepContext(None, None, 1.2e9, 4000, "fp32", "fp32", "unknown",
                     {1: PidGpus((0,), 19.5e12, 2039e9, "A100 SXM4 80GB (assumed)",
                                 "peaks of A100 SXM4 80GB, a representative ampere GPU")})
    empty = StepShapes(None, None, 0, None, None, False, 0.0)
    rows = [step_row(sc, {"step": 0, "phase": "step", "pid": 1, "latency_ns": 29_350_000}, empty)]
    (phase,) = phase_rows(pd.DataFrame(rows, columns=list(STEP_COLUMNS)), sc)
    assert rows[0]["mfu_pct"] == 838.68
    (w,) = phase_warnings(phase, rows, sc)
    assert "MFU 838.7% is above 100%" in w and "the fp32 dense peak (19.5 TFLOP/s per GPU)" in w
    assert w.endswith("the figures use assumed peaks of A100 SXM4 80GB, a representative ampere GPU")


def test_the_report_warns_about_an_impossible_mfu(build, tmp_path) -> None:
    # 1.5 GFLOP x 100 tokens per step whose own GPU work spans 60 us (its first kernel 10 us into
    # the 100 us range, its last ending at 70 us) on an H100 (989.5 TFLOP/s): 252.7%
    trace = build(nvtx_trace(with_sizes=False))
    out = tmp_path / "out"
    res = run_cli(trace, "--out", out, "-q", "--step-range", "step", "--format", "json,md",
                  "--model-flops-per-token", "1.5G", "--tokens-per-step", "100")
    assert res.exit_code == 0, res.stderr
    doc = json.loads((out / "report.json").read_text(encoding="utf-8"))
    mfu = 100 * 1.5e9 * 100 / (NVTX_GPU_NS * 1e-9 * H100_BF16)
    phase = doc["metrics"]["model_utilization"]["phases"][0]
    assert phase["mfu_pct"] == pytest.approx(mfu, abs=0.005) == 252.65
    (w,) = phase["warnings"]
    assert "MFU 252.7% is above 100%" in w
    assert doc["warnings"] == [f"model_utilization: {w}"]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "**Warning:** phase 'step': MFU 252.7% is above 100%" in md
    # a plausible figure gives none (20.2%: 1.5 GFLOP x 8 tokens)
    report = analyze(trace, step_range="step", model_flops_per_token=1.5e9, tokens_per_step=8)
    assert ok(report, "model_utilization")["phases"][0]["warnings"] == [] and report.warnings == ()
