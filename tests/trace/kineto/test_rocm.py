"""PyTorch profiler traces from ROCm: GPU names from deviceProperties (an empty name gets a
descriptive one), AMD kernel families, precision advice for AMD, and no Nsight Compute plan."""

from __future__ import annotations

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.kernels.categories import BUILTIN_TABLE
from nsys_llm_explainer.model import Skipped
from nsys_llm_explainer.trace.kineto.load import gpus_of
from tests.fixtures.kineto.builder import KinetoBuilder

TENSILE_BF16 = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1"
TENSILE_FP32 = "Cijk_Ailk_Bljk_SB_MT64x64x8_SE_AF0EM1_AMAS2_ASEM1_BL0_DTL0_GRVW2_GSU1_ISA000_K1_TT4_4_WG16_16_1"
MI300X = {"id": 0, "name": "", "totalGlobalMem": 205_571_227_648, "computeMajor": 9, "computeMinor": 4,
          "warpSize": 64, "numSms": 304, "maxSharedMemoryPerMultiProcessor": 65_536}


def test_an_empty_rocm_name_is_the_product_its_signature_names_else_a_description():
    # gfx 9.4 (CDNA3), 304 CUs and 191.5 GiB (192 GB less what ROCm reserves): an MI300X
    (g,) = gpus_of({"roctracer_version": "4.1", "deviceProperties": [MI300X]})
    assert g.name == "AMD Instinct MI300X"
    assert (g.vendor, g.compute_capability) == ("amd", "9.4")
    # 256 GB with the same CUs is an MI325X; 80 CUs is no product of the table: described, not guessed
    big_memory = MI300X | {"totalGlobalMem": 274_877_906_944}
    (big,) = gpus_of({"roctracer_version": "4.1", "deviceProperties": [big_memory]})
    assert big.name == "AMD Instinct MI325X"
    (other,) = gpus_of({"roctracer_version": "4.1", "deviceProperties": [MI300X | {"numSms": 80}]})
    assert other.name == "AMD GPU gfx94x (MI300 series), 80 CUs, 191 GiB (name not recorded)"
    (named,) = gpus_of({"hip_runtime_version": 60131199,
                              "deviceProperties": [MI300X | {"name": "AMD Instinct MI300X"}]})
    assert named.name == "AMD Instinct MI300X" and named.vendor == "amd"


def test_amd_kernel_families():
    names = [TENSILE_BF16, "void ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<Pipeline>>(int)",
             "void aiter::paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, 16>(int)",
             "void wvSplitK_hf_sml_<__hip_bfloat16, 64, 2>(int)", "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage)"]
    assert BUILTIN_TABLE.classify(names)[0] == ["gemm", "attention", "attention", "gemm", "communication"]


def test_a_rocm_trace_gets_amd_advice_and_no_ncu_plan(tmp_path):
    b = KinetoBuilder()
    b.top.update(roctracer_version="4.1", hip_runtime_version=60131199, deviceProperties=[MI300X])
    t = 0
    for i in range(120):  # FP32 Tensile GEMMs on the vector units, and BF16 ones on matrix cores
        name = TENSILE_FP32 if i % 2 else TENSILE_BF16
        b.launch(name, t, t + 5_000, t + 6_000, t + 406_000, corr=i + 1)
        t += 410_000
    report = explain(b.write(tmp_path / "rocm.json"))
    gp = report.ok("gemm_precision")
    assert gp is not None and gp.data["arch"]["vendor"] == "amd" and gp.data["arch"]["family"] == "cdna3"
    (f,) = [x for x in report.findings if x.rule_id == "NLE323"]
    assert "torch.bfloat16" in f.recommendation[0] and "TF32" not in " ".join(f.recommendation)
    plan = report.metrics["ncu_plan"]
    assert isinstance(plan, Skipped) and "Nsight Compute profiles NVIDIA GPUs only" in plan.reason
    advice = " ".join(r for x in report.findings for r in x.recommendation)
    assert "ncu " not in advice and "Nsight Compute" not in advice
    assert report.trace.gpus[0].name == "AMD Instinct MI300X"
