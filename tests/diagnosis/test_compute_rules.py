"""Compute-side findings put at stake only what their cause could give back (DIAGNOSIS.md
principle 1), never two findings on the same time, and advice that fits the workload."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Severity
from nsys_llm_explainer.rules.kernels import PER_LAUNCH_SAVING_NS
from tests.fixtures import planted
from tests.fixtures.builder import TraceBuilder
from tests.rule_inputs import device_metrics, fire

MS, US = planted.MS, planted.US
Build = Callable[[TraceBuilder], Path]
ELEMENTWISE = planted.ELEMENTWISE
MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
       "at::native::MulFunctor<float>>, char*>(int)")
RSQRT = "void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda<float>, char*>(int)"
FLASH = ("void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, "
         "true>(Flash_fwd_params)")


def chain(kernels: list[str], occurrences: int, kernel_ns: int, gaps_ns: int) -> dict[str, Any]:
    return {"candidates": [{"occurrences": occurrences, "proximity": 0.9, "kernel_ns": kernel_ns,
                            "length": len(kernels), "kernels": kernels, "removable_gap_ns": gaps_ns}]}


def top(*rows: tuple[str, int, int], device: int = 0) -> dict[str, Any]:
    """top_kernels rows (name, total ns, p50 ns) on one device."""
    return {"kernels": [{"name": n, "device_id": device, "calls": 100, "total_ns": t, "p50_ns": p, "max_ns": p}
                        for n, t, p in rows]}


def test_fusion_puts_gaps_and_launches_at_stake_not_kernel_time() -> None:
    # 10 ms window, 3 ms of host_other idle. 500 chains of 3 kernels: 2 ms of kernel time,
    # 1.5 ms of gaps inside; fusion removes 1,000 launches x 1 us, at most half the kernel time.
    window = 10 * MS
    data = device_metrics({0: {"host_other": 3 * MS}}, window=window)
    data["fusion_candidates"] = chain([ELEMENTWISE, MUL, RSQRT], 500, 2 * MS, 1_500 * US)
    (f,) = fire("NLE312", data)
    saving = min(500 * 2 * PER_LAUNCH_SAVING_NS, 2 * MS // 2)
    assert f.impact_ns == 1_500 * US + saving == 2_500 * US  # not the 2 ms of kernel time
    assert f.impact_pct == 100 * 2_500 * US / window == 25.0 and f.severity is Severity.HIGH
    assert "memory-bound" in f.title
    # The gaps count only up to the host-side idle time (fusing removes launches, not copies).
    data = device_metrics({0: {"host_other": 200 * US, "transfer": 2_800 * US}}, window=window)
    data["fusion_candidates"] = chain([ELEMENTWISE, MUL, RSQRT], 500, 2 * MS, 1_500 * US)
    (f,) = fire("NLE312", data)
    assert f.impact_ns == 200 * US + saving


def test_gemm_and_attention_chains_are_not_fusion_candidates() -> None:
    data = device_metrics({0: {"host_other": 3 * MS}}, window=10 * MS)
    data["fusion_candidates"] = chain([planted.GEMM_BF16, FLASH, planted.GEMM_BF16], 500, 2 * MS, 1_500 * US)
    assert fire("NLE312", data) == []


def test_decode_of_short_gemms_and_attention_has_no_fusion_finding(build: Build) -> None:
    """A decode loop: 20 kernels of 25 us (GEMMs and flash attention) per step, then 400 us of
    scheduler work. A chain of GEMMs is not an unfused elementwise chain."""
    b = TraceBuilder("2024.6")
    b.process(100)
    s = planted.Sim(b)
    for _ in range(200):
        for i in range(20):
            s.launch(25 * US, FLASH if i % 4 == 0 else planted.GEMM_BF16)
        s.work(400 * US)
    s.sync()
    r = explain(build(b))
    assert not [f for f in r.findings if f.rule_id in ("NLE312", "NLE302")]
    (dominant,) = [f for f in r.findings if f.rule_id == "NLE101"]
    assert (dominant.severity, dominant.impact_ns) == (Severity.INFO, None)


def test_dominant_kernel_puts_its_time_above_the_roof_at_stake() -> None:
    data = device_metrics({0: {}})
    data["top_kernels"] = top((planted.GEMM_BF16, 600_000, 6_000), (ELEMENTWISE, 400_000, 4_000))
    data["compute_efficiency"] = {"kernels": [
        {"name": planted.GEMM_BF16, "device_id": 0, "pct_of_roof": 40.0, "implausible": False}]}
    (f,) = fire("NLE101", data)
    # 600 us at 40% of its roof: 360 us above it, 36% of the 1 ms window.
    assert (f.impact_ns, f.severity) == (360_000, Severity.HIGH)
    assert any("it runs 360 µs slower than its roofline minimum: it reaches 40.0% of the roof" in e for e in f.evidence)
    del data["compute_efficiency"]
    (f,) = fire("NLE101", data)
    assert (f.impact_ns, f.severity) == (None, Severity.INFO)


@pytest.mark.parametrize(("reached", "first"), [
    (40.0, "Check its launch shapes"),  # far below its roof: a tiny M may starve the tiles
    (62.9, "Profile this kernel"),  # 62.9% of its roof: not tile-starved, no shape advice
])
def test_shape_advice_only_for_a_gemm_far_from_its_roof(reached, first) -> None:
    data = device_metrics({0: {}})
    data["top_kernels"] = top((planted.GEMM_BF16, 600_000, 6_000), (ELEMENTWISE, 400_000, 4_000))
    data["compute_efficiency"] = {"kernels": [
        {"name": planted.GEMM_BF16, "device_id": 0, "pct_of_roof": reached, "implausible": False}]}
    (f,) = fire("NLE101", data)
    assert f.recommendation[0].startswith(first)
    assert any(r.startswith("Check its launch shapes") for r in f.recommendation) is (reached < 60)


def test_dominant_fp32_gemm_is_left_to_nle323() -> None:
    data = device_metrics({0: {}})
    data["top_kernels"] = top((planted.FP32_GEMM, 600_000, 6_000), (ELEMENTWISE, 400_000, 4_000))
    data["gemm_precision"] = {"by_device": [], "fp32_kernels": [
        {"name": planted.FP32_GEMM, "device_id": 0, "calls": 100, "kernel_ns": 600_000, "dtype_token": "f32f32"}]}
    assert fire("NLE101", data) == []


def test_short_ops_need_a_short_median_and_do_not_stack() -> None:
    # 10 ms window: 4.5 ms of short elementwise kernels, 1 ms of a long copy kernel, 4.5 ms of GEMM.
    copy = "void at::native::elementwise_kernel<128, 2, at::native::copy_device_to_device>(int)"
    data = device_metrics({0: {"host_other": 2 * MS}}, window=10 * MS)
    data["top_kernels"] = top((ELEMENTWISE, 4_500 * US, 10 * US), (planted.GEMM_BF16, 4_500 * US, 20 * US),
                              (copy, 1 * MS, 17 * MS))
    (f,) = fire("NLE302", data)
    assert f.impact_ns == 4_500 * US  # the 17 ms copy is not a short op
    assert "45.0% of GPU 0's kernel time" in f.title
    assert any("1 small-op kernels with a median over 30.0 µs (1.00 ms) are not counted" in e for e in f.evidence)
    # With a fusion chain over the same kernels, its launch saving is NLE312's, not counted twice.
    data["fusion_candidates"] = chain([ELEMENTWISE, ELEMENTWISE], 100, 4 * MS, 500 * US)
    (f,) = fire("NLE302", data)
    (g,) = fire("NLE312", data)
    assert f.impact_ns == 4_500 * US - 100 * PER_LAUNCH_SAVING_NS
    assert g.impact_ns == 500 * US + 100 * PER_LAUNCH_SAVING_NS
    # A dominant short kernel whose roof is known is NLE101's time, not NLE302's.
    data["compute_efficiency"] = {"kernels": [
        {"name": ELEMENTWISE, "device_id": 0, "pct_of_roof": 50.0, "implausible": False}]}
    assert fire("NLE302", data) == []
    (d,) = fire("NLE101", data)
    assert d.impact_ns == 4_500 * US // 2


def test_comm_on_the_compute_stream_is_evidence_of_nle307_and_advice_fits_the_workload() -> None:
    data = device_metrics({0: {"exposed": 400_000}})
    data["communication"]["devices"][0] |= {"shared_streams": [7], "shared_stream_comm_ns": 400_000}
    (exposed,) = fire("NLE307", data, workload="llm_inference")
    (note,) = fire("NLE313", data, workload="llm_inference")
    assert exposed.impact_ns == 400_000 and (note.severity, note.impact_ns) == (Severity.INFO, None)
    assert "GPU 0: 400 µs of communication on its compute stream (streams 7)" in exposed.evidence[-1]
    tp = " ".join(note.recommendation)
    assert "gains nothing by itself" in tp and "own stream (DDP" not in tp
    assert exposed.recommendation[0] == note.recommendation[0]
    (note,) = fire("NLE313", data, workload="llm_training")
    assert "Run gradient collectives on their own stream" in note.recommendation[0]


def test_host_side_communication_without_kernels_is_said_so() -> None:
    # 300 us of GPU idle while the host was in MPI calls (communication bucket), no NCCL kernels.
    data = device_metrics({0: {"communication": 300_000}})
    (f,) = fire("NLE307", data, workload="generic_cuda")
    assert f.impact_ns == 300_000 and f.impact_pct == 30.0
    assert not any("of communication kernels" in e for e in f.evidence)
    assert any(e.startswith("no communication kernels ran") for e in f.evidence)
    assert "MPI_Isend" in f.recommendation[0]
    # With 200 us of communication kernels on the device, those are what the evidence lists.
    data = device_metrics({0: {"communication": 100_000, "exposed": 200_000}})
    (f,) = fire("NLE307", data, workload="generic_cuda")
    assert "GPU 0: 200 µs of communication kernels, 0.0% overlapped by compute" in f.evidence
    assert "own stream" in f.recommendation[0]


def test_no_kernels_advice_fits_the_workload() -> None:
    skipped = {"top_kernels": "the kernel table is empty: no CUDA kernels were captured"}
    (f,) = fire("NLE107", {}, workload="unknown", skipped=skipped)
    text = " ".join(f.recommendation)
    assert "./your_app" in text and "serve.py" not in text and "inference" not in text
    (f,) = fire("NLE107", {}, workload="llm_training", skipped=skipped)
    assert "python train.py" in " ".join(f.recommendation)
    (f,) = fire("NLE107", {}, workload="llm_inference", skipped=skipped)
    assert "python serve.py" in " ".join(f.recommendation)


def test_tile_advice_only_for_tensor_core_gemms() -> None:
    data = device_metrics({0: {}})
    data["top_kernels"] = top((planted.GEMM_BF16, 600_000, 6_000), (ELEMENTWISE, 400_000, 4_000))
    (f,) = fire("NLE101", data)
    assert len(f.recommendation) == 2 and "tensor-core tile" in f.recommendation[1]
    data["top_kernels"] = top(("volta_dgemm_128x64_nn", 600_000, 6_000), (ELEMENTWISE, 400_000, 4_000))
    (f,) = fire("NLE101", data)
    assert len(f.recommendation) == 1 and "Nsight Compute" in f.recommendation[0]
