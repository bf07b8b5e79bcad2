"""NLE320-NLE323: the GPU time at stake, computed by hand, and when each rule stays quiet."""

from __future__ import annotations

from typing import Any

import pytest

from nsys_llm_explainer.diagnosis import accounting
from nsys_llm_explainer.model import Confidence, Severity
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.rules import RULES, RuleInput
from tests.compute_rule_data import efficiency, gemm_op, phase, precision, utilization
from tests.rule_inputs import device_metrics, outcomes
from tests.typed_results import result

WINDOW = 100_000_000  # each device's window: 100 ms


def check(rid: str, workload: str = "llm_inference", **data: dict[str, Any]) -> list[Any]:
    metrics = outcomes(device_metrics({0: {}, 1: {}}, window=WINDOW))
    metrics.update({m: result(m, d) for m, d in data.items()})
    rule = next(r for r in RULES if r.id == rid)
    return list(rule.check(RuleInput(metrics, Options(), None, accounting.build(metrics), workload), rule))  # type: ignore[arg-type]


def test_nle320_stake_is_time_times_the_missing_share_of_the_roof() -> None:
    ops = [gemm_op(20.0, 10_000_000), gemm_op(40.0, 5_000_000, m=4096, n=4096, k=4100),
           gemm_op(60.0, 50_000_000), {**gemm_op(5.0, 50_000_000), "implausible": True},
           gemm_op(10.0, 50_000_000, family="attention")]
    (f,) = check("NLE320", compute_efficiency=efficiency(*ops))
    assert f.impact_ns == 10_000_000 * 8 // 10 + 5_000_000 * 6 // 10  # 11 ms
    assert f.impact_pct == 11.0 and f.severity == Severity.MEDIUM
    assert f.title == "2 GEMM operations reach 20.0% to 40.0% of their roof"
    assert "M = 16" in f.evidence[1] and "not a multiple of 8" in f.evidence[3]
    assert f.confidence == Confidence.MEDIUM and any("continuous batching" in r for r in f.recommendation)


def test_nle320_per_device_and_low_confidence_when_assumed() -> None:
    ops = [gemm_op(0.0, 30_000_000, device=0, source="assumed"), gemm_op(50.0, 90_000_000, device=1)]
    (f,) = check("NLE320", compute_efficiency=efficiency(*ops))
    assert [(a.device_id, a.impact_ns) for a in f.affected] == [(0, 30_000_000)]
    assert f.severity == Severity.HIGH and f.confidence == Confidence.LOW
    assert f.title == "A GEMM operation reaches 0.0% of its roof"


def test_nle320_large_gemms_are_not_a_batch_or_wave_problem() -> None:
    """15360 x 24576 is 120 x 192 = 23,040 tiles of 128 x 128 and 15360 x 4096 is 3,840 (over
    2,048: many waves on any GPU): the advice is the library's kernel choice and the clocks,
    not batching; 4096 x 4096 is 1,024 tiles, so a mix keeps the batching advice."""
    big = [gemm_op(34.9, 244_000_000, m=15360, n=24576), gemm_op(44.6, 95_000_000, m=15360, n=4096, k=12288)]
    (f,) = check("NLE320", compute_efficiency=efficiency(*big))
    assert f.evidence[1].endswith("15360 x 24576 x 4096: large on every side (23,040 tiles of 128 x 128), so not "
                                  "the tiles or the waves: the kernel the library picked, or the clocks it ran at")
    assert "(3,840 tiles of 128 x 128)" in f.evidence[3]
    assert f.recommendation[0].startswith("These GEMMs are large on every side")
    assert not any("continuous batching" in r for r in f.recommendation)
    (mixed,) = check("NLE320", compute_efficiency=efficiency(*big, gemm_op(20.0, 10_000_000, m=4096, n=4096)))
    assert "tile shape or wave quantization" in mixed.evidence[5]
    assert any("continuous batching" in r for r in mixed.recommendation)


def test_nle320_quiet_at_the_roof_or_below_the_bands() -> None:
    assert check("NLE320", compute_efficiency=efficiency(gemm_op(55.0, 90_000_000))) == []
    assert check("NLE320", compute_efficiency=efficiency(gemm_op(10.0, 1_000_000))) == []  # 0.9 ms: < 1%


def test_nle321_low_mfu_stake_per_device() -> None:
    mu = utilization(phase("prefill", 50_000_000, mfu=10.0, devices=(0, 1)), phase("decode", 50_000_000, mfu=1.0))
    (f,) = check("NLE321", model_utilization=mu, compute_efficiency=efficiency(memory_pct=44.4))
    assert [(a.device_id, a.impact_ns) for a in f.affected] == [(0, 45_000_000), (1, 45_000_000)]
    assert f.impact_pct == 45.0 and f.severity == Severity.HIGH
    assert f.title == "Phase 'p' (prefill) runs at 10.0% MFU"
    assert "tokens per step: --tokens-per-step" in f.evidence[1]
    assert f.evidence[-1] == "memory-bound operators (no FLOPs) take 44.4% of the kernel time"


def test_nle321_and_nle322_give_a_phase_with_a_warning_low_confidence() -> None:
    warn = "phase 'p': HFU 3.0% below MFU 10.0% is inconsistent"
    mu = utilization({**phase("prefill", 50_000_000, mfu=10.0), "warnings": [warn]})
    (f,) = check("NLE321", model_utilization=mu)
    assert f.confidence == Confidence.LOW and f"warning: {warn}" in f.evidence
    (g,) = check("NLE321", model_utilization=utilization(phase("prefill", 50_000_000, mfu=10.0)))
    assert g.confidence == Confidence.MEDIUM and not any(e.startswith("warning:") for e in g.evidence)
    mu = utilization({**phase("decode", 50_000_000, mbu=20.0), "warnings": [warn]})
    (h,) = check("NLE322", model_utilization=mu)
    assert h.confidence == Confidence.LOW and f"warning: {warn}" in h.evidence


@pytest.mark.parametrize("mfu", [30.0, None])
def test_nle321_quiet(mfu: float | None) -> None:
    assert check("NLE321", model_utilization=utilization(phase("training", 90_000_000, mfu=mfu))) == []


def test_nle322_low_mbu_in_decode_only() -> None:
    mu = utilization(phase("decode", 50_000_000, mbu=20.0, name="decode"), phase("prefill", 50_000_000, mbu=5.0))
    (f,) = check("NLE322", model_utilization=mu)
    assert f.impact_ns == 40_000_000 and f.severity == Severity.HIGH
    assert f.title == "Phase 'decode' reads weights and KV cache at 20.0% of peak bandwidth"
    assert check("NLE322", model_utilization=utilization(phase("decode", 50_000_000, mbu=50.0))) == []


def test_nle323_fp32_gemm_impact_is_their_kernel_time() -> None:
    (f,) = check("NLE323", workload="pytorch_training", gemm_precision=precision(20_000_000, 30_000_000))
    assert f.impact_ns == 20_000_000 and f.severity == Severity.MEDIUM
    assert f.title == "Float32 GEMMs on CUDA cores take 66.7% of GPU 0's GEMM time"
    assert any("allow_tf32 = True" in r for r in f.recommendation)
    assert any("bfloat16" in r for r in f.recommendation)
    (g,) = check("NLE323", workload="generic_cuda", gemm_precision=precision(20_000_000, 30_000_000))
    assert any("CUBLAS_TF32_TENSOR_OP_MATH" in r for r in g.recommendation)


def test_nle323_quiet_below_five_percent_of_gemm_time() -> None:
    assert check("NLE323", gemm_precision=precision(4_000_000, 100_000_000)) == []


def test_nle323_lists_a_kernel_once_over_its_devices() -> None:
    data = precision(20_000_000, 30_000_000)
    data["by_device"].append({**data["by_device"][0], "device_id": 1})
    data["fp32_kernels"].append({**data["fp32_kernels"][0], "device_id": 1})
    (f,) = check("NLE323", gemm_precision=data)
    assert f.impact_ns == 20_000_000 and len(f.affected) == 2  # the largest device's, never the sum
    assert f.evidence[0].endswith("40.0 ms in 14 calls; its full name has 'ampere_sgemm_128x64...' "
                                  "(float32 operands, no tensor cores)")
    assert f.title == "Float32 GEMMs on CUDA cores take up to 66.7% of the GEMM time of 2 GPUs"
