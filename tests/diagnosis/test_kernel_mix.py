"""What GPU-bound kernels are limited by (diagnosis/kernel_mix.py): the roofline where shapes
placed a kernel on it, kernel families where not, and the dominant kernel family."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.diagnosis.kernel_mix import classify, kernel_class

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3>>(int)"
FLASH = "void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>>(Params)"


@pytest.mark.parametrize(("name", "family", "roof", "no_matrix", "want"), [
    (GEMM, "gemm", ("compute", 62.9), False, "compute"),  # at 62.9% of its roof: compute-bound
    (FLASH, "attention", ("memory", 19.3), False, "far"),  # under the memory roof at 19%: far from both
    (GEMM, "gemm", None, False, "compute"),  # no shapes: compute-bound by family
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16>(int)", "gemm", None, False, "memory"),
    ("flash_fwd_splitkv_kernel", "attention", None, False, "memory"),  # decode attention streams the KV cache
    (ADD, "activation_elementwise", None, False, "memory"),
    ("void clover::par_ranged2d_kernel<PdV_kernel>(clover::Range2d, T1)", "other", None, True, "memory"),
    ("void my_kernel(int)", "other", None, False, "unknown"),
])
def test_kernel_class(name, family, roof, no_matrix, want):
    assert kernel_class(name, family, roof, no_matrix) == want


def test_a_stencil_code_is_memory_bound_and_its_template_is_named_once():
    rows = [(f"void clover::par_ranged2d_kernel<K{i}>(clover::Range2d, T1)", "other", 90) for i in range(10)]
    rows += [("void clover::par_reduce_kernel<calc_dt>(T1)", "reduction", 80),
             ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication", 5_000)]
    mix = classify(rows, {})
    # communication is not the kernels' limit, but it is kernel time: shares are of all of it
    assert (mix.total_ns, mix.comm_ns, mix.compute_ns) == (5_980, 5_000, 980) and mix.no_matrix
    assert mix.limit == "memory" and round(mix.pct("memory"), 2) == round(100 * 980 / 5_980, 2)
    assert (mix.limit, mix.basis) == ("memory", "families")
    assert mix.dominant == ("par_ranged2d_kernel", 900, 10) and mix.dominant_name is None


def test_a_mix_below_sixty_percent_is_stated_not_named():
    # 50% GEMM time (compute by family), 50% elementwise (memory): neither class reaches 60%.
    mix = classify([(GEMM, "gemm", 500), (ADD, "activation_elementwise", 500)], {})
    assert mix.limit == "mixed" and (mix.pct("compute"), mix.pct("memory")) == (50.0, 50.0)
    # The roofline overrides the family: the GEMM at 30% of its roof is far from both roofs.
    mix = classify([(GEMM, "gemm", 700), (ADD, "activation_elementwise", 300)], {GEMM: ("compute", 30.0)})
    assert (mix.limit, mix.basis) == ("far", "roofline and families")
    assert mix.dominant_name == GEMM
