"""Precision advice fits the GPU: by architecture (rules/efficiency.py) and by the
number format already in use (an FP32 accumulator is not an FP32 GEMM)."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.compute.arch import resolve
from nsys_llm_explainer.compute.peaks import lookup
from nsys_llm_explainer.model import GpuInfo
from nsys_llm_explainer.rules.efficiency import fp32_matmul
from tests.compute_rule_data import precision
from tests.rule_inputs import device_metrics, fire


def family_of(name: str) -> str | None:
    spec = lookup(name)
    return spec.arch or None if spec is not None else None


@pytest.mark.parametrize(("family", "exact", "must", "never"), [
    # Volta and Turing: no TF32 or BF16: FP16 autocast with a gradient scaler.
    ("volta", True, ("torch.float16", "GradScaler"), ("bfloat16", "allow_tf32", "set_float32_matmul_precision", "FP8")),
    ("turing", True, ("torch.float16", "GradScaler"), ("bfloat16", "set_float32_matmul_precision", "FP8")),
    # Ampere: TF32 or BF16, no FP8.
    ("ampere", True, ("set_float32_matmul_precision('high')", "torch.bfloat16"), ("FP8", "MXFP8", "GradScaler")),
    # Ada and Hopper add FP8 (Transformer Engine); no block-scaled formats.
    ("ada", True, ("torch.bfloat16", "te.fp8_autocast"), ("MXFP8", "NVFP4")),
    ("hopper", True, ("torch.bfloat16", "te.fp8_autocast"), ("MXFP8", "NVFP4", "GradScaler")),
    # Blackwell adds MXFP8 and NVFP4.
    ("blackwell", True, ("torch.bfloat16", "MXFP8BlockScaling", "NVFP4"), ("GradScaler",)),
    # AMD: BF16, never a CUDA-only API.
    ("cdna3", True, ("torch.bfloat16", "MI300X"), ("TF32", "te.fp8_autocast", "cublas")),
])
def test_advice_by_architecture(family, exact, must, never):
    text = " ".join(fp32_matmul(family, exact, pytorch=True, amd=family.startswith("cdna")))
    for word in must:
        assert word in text, word
    for word in never:
        assert word not in text, word


def test_unknown_or_lower_bound_architectures_say_which_generation_each_line_needs():
    unknown = fp32_matmul(None, False, pytorch=True)
    assert unknown[0].startswith("If this GPU is Ampere or newer: ")
    assert unknown[-1].startswith("On Volta or Turing, which have neither TF32 nor BF16: ")
    at_least_ampere = fp32_matmul("ampere", False, pytorch=True)  # sm80 kernel names: Ampere or newer
    assert "set_float32_matmul_precision" in at_least_ampere[0]
    assert at_least_ampere[-1].startswith("On Ada, Hopper or newer")
    plain = fp32_matmul("ampere", True, pytorch=False)
    assert "CUBLAS_TF32_TENSOR_OP_MATH" in plain[0] and "torch" not in " ".join(plain)


@pytest.mark.parametrize(("gpus", "names", "want"), [
    ([GpuInfo(0, "NVIDIA A100-SXM4-80GB", compute_capability="8.0", vendor="nvidia")], [], ("nvidia", "ampere", True)),
    ([GpuInfo(0, "Some New GPU", compute_capability="9.0", vendor="nvidia")], [], ("nvidia", "hopper", True)),
    ([GpuInfo(0, "Tesla V100-SXM2-32GB")], [], ("nvidia", "volta", True)),
    ([], ["sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_warpsize1x4x1_ffma"], ("nvidia", "ampere", False)),
    ([GpuInfo(0, "AMD Instinct MI300X", compute_capability="9.4", vendor="amd")], [], ("amd", "cdna3", True)),
    # An AMD GPU whose name ROCm left empty: its gfx version still keys the advice.
    ([GpuInfo(0, None, compute_capability="9.4", vendor="amd")], [], ("amd", "cdna3", True)),
    ([], ["Cijk_Alik_Bljk_SB_MT64x64x8_TT4_4"], ("amd", None, False)),
    ([], ["my_kernel"], (None, None, False)),
])
def test_architecture_from_the_trace(gpus, names, want):
    arch = resolve(gpus, names, family_of)
    assert (arch.vendor, arch.family, arch.exact) == want


def test_fp32_convolutions_on_an_old_gpu_get_fp16_advice_and_name_the_gpu():
    data = precision(60_000_000, 100_000_000)
    data["fp32_kernels"][0].update(name="volta_scudnn_128x64_relu_interior_nn_v1", family="conv", dtype_token="scudnn")
    data["arch"] = {"vendor": "nvidia", "family": "volta", "exact": True, "why": "Tesla V100-SXM2-32GB (Volta)"}
    (f,) = fire("NLE323", {**device_metrics({0: {}}, window=100_000_000), "gemm_precision": data},
                workload="pytorch_training")
    assert f.title == "Float32 convolutions on CUDA cores take 60.0% of GPU 0's convolution time"
    assert "GPU: Tesla V100-SXM2-32GB (Volta)" in f.evidence
    assert "torch.float16" in f.recommendation[0] and "GradScaler" in f.recommendation[0]
    assert not any("bfloat16" in r or "allow_tf32" in r or "set_float32_matmul_precision" in r
                   for r in f.recommendation)


def test_reduced_precision_gemms_are_never_fp32_findings():
    # An FP8 GEMM with FP32 accumulation is not in fp32_kernels (gemm_precision reads the
    # operand type): nothing to report, so no advice to move to BF16 (a downgrade).
    from nsys_llm_explainer.kernels.math_mode import math_mode
    from nsys_llm_explainer.metrics.gemm_precision import is_fp32_cuda_core

    for name in ("bmm_Bfloat16_E4m3E4m3_Fp32_t128x8x128u2_s8", "nvjet_sm100_ootst_128x256_Avec16UE4M3_TNT",
                 "cutlass3x_sm100_bstensorop_gemm_ue8m0xe2m1_ue8m0xe2m1_f32_void_bf16_128x128x256"):
        m = math_mode(name)
        assert not is_fp32_cuda_core(m.dtype, m.tensor_cores), name
