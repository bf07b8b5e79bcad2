"""A synthetic PyTorch profiler decode step: Concrete Inputs (is_causal) reach the attention
formula, tokens and batch come from the embedding's input, the context from the attention's
key length, and MBU from --model's weights and KV cache. Expected numbers by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import analyze, ok
from tests.fixtures.kineto.builder import KinetoBuilder

CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "hf_configs" / "qwen1.5-0.5b.json"
STEP_NS = 1_000_000
GPU_NS = 20_000  # decode_trace(): its kernels run from 20 us to 40 us into the step
B, CTX, H, D = 2, 1024, 16, 64


def decode_trace(path: Path, causal: str | None = "True") -> Path:
    k = KinetoBuilder()
    k.top["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    k.user("ProfilerStep#7", 0, STEP_NS)
    emb = k.op("aten::embedding", 1_000, 9_000, dims=[[151936, 1024], [B, 1], [], [], []],
               types=["c10::BFloat16", "long int", "Scalar", "Scalar", "Scalar"])
    emb["args"]["Concrete Inputs"] = ["", "", "-1", "False", "False"]
    k.runtime("cudaLaunchKernel", 2_000, 3_000, corr=1)
    k.kernel("void at::native::indexSelectLargeIndex<c10::BFloat16>(int)", 20_000, 24_000, corr=1)
    q = [B, 1, H, D]
    kv = [B, CTX, H, D]
    sdpa = [[B, H, 1, D], [B, H, CTX, D], [B, H, CTX, D]]
    k.op("aten::scaled_dot_product_attention", 10_000, 19_000, dims=sdpa, types=["c10::BFloat16"] * 3)
    fa = k.op("aten::_flash_attention_forward", 11_000, 18_000,
              dims=[q, kv, kv, [], [], [], [], [], [], [], [], [], [], [], []],
              types=["c10::BFloat16"] * 3 + ["", ""] + ["Scalar"] * 5 + [""] * 5)
    fa["args"]["Concrete Inputs"] = ["", "", "", "", "", "1", "1024", "0.0", causal or "", "False", "", "", "", "", ""]
    if causal is None:
        del fa["args"]["Concrete Inputs"]
    k.runtime("cudaLaunchKernel", 12_000, 13_000, corr=2)
    k.kernel("void pytorch_flash::flash_fwd_splitkv_kernel<cutlass::bfloat16_t>(int)", 30_000, 40_000, corr=2)
    return k.write(path)


def test_concrete_inputs_mark_attention_causal(tmp_path: Path) -> None:
    full = 2 * B * H * 1 * CTX * (D + D)  # 2*B*Hq*Lq*Lk*(Dqk+Dv) = 8,388,608
    for causal, flops in (("True", full // 2), ("False", full), (None, full)):
        report = analyze(decode_trace(tmp_path / f"t{causal}.json", causal))
        (att,) = [o for o in ok(report, "compute_efficiency")["operations"] if o["family"] == "attention"]
        assert att["flops"] == flops, causal
        if causal is None:
            assert "is_causal not recorded" in att["assumptions"]


def test_decode_step_mbu_from_the_config(tmp_path: Path) -> None:
    report = analyze(decode_trace(tmp_path / "t.json"), model_config=str(CONFIG))
    (s,) = ok(report, "model_utilization")["steps"]
    assert (s["kind"], s["tokens"], s["batch"], s["context"]) == ("decode", B, B, CTX)
    # weights: all 463,987,712 parameters (tied embedding read whole as the LM head) in bf16,
    # plus the 2 looked-up embedding rows; KV cache: 2 sequences x 1024 keys x 24 layers x
    # (K and V: 2 x 16 heads x 64) x 2 bytes.
    weights = 463_987_712 * 2 + B * 1024 * 2
    kv = B * CTX * 24 * 2 * H * D * 2
    assert s["bytes_per_step"] == weights + kv  # 1,129,306,112
    # Per-step figures divide by the step's own GPU work: its two kernels span 20 us of the 1 ms
    # step range (the synthetic step reads far more than a GPU could in that time).
    assert s["window_ns"] == GPU_NS
    assert s["mbu_pct"] == pytest.approx(100 * (weights + kv) / (GPU_NS * 1e-9 * 3350e9), abs=0.005)
    per_token = 2 * 463_863_808 + 2 * 24 * H * (D + D) * CTX
    assert s["flops_per_token"] == per_token
    assert s["mfu_pct"] == pytest.approx(100 * per_token * B / (GPU_NS * 1e-9 * 989.5e12), abs=0.005)
    phase = ok(report, "model_utilization")["phases"][0]
    assert phase["kind"] == "decode" and any(line.startswith("bytes per step:") for line in phase["inputs"])
