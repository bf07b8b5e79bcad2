"""math_mode: operand data type and tensor-core use read from GEMM/conv kernel names, one
case per naming rule (module doc of nsys_llm_explainer.kernels.math_mode)."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.kernels.math_mode import DTYPES, math_mode

CASES = [
    # (name, dtype, tensor cores, dtype token, tensor-core token)
    # xmma operand pairs; ffma is a scalar (SIMT) FMA kernel.
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_"
     "alignc4_execute_kernel__5x_cublas", "fp32", False, "f32f32", "ffma"),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x32_stage3_warpsize2x4x1_"
     "tensor16x8x16_kernel", "bf16", True, "bf16bf16", "tensor16x8x16"),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x32_stage3_warpsize2x4x1_tensor16x8x16_kernel",
     "fp16", True, "f16f16", "tensor16x8x16"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas", "bf16", True, "bf16bf16", "warpgroupsize1x1x1"),
    ("sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_warpgroupsize2x1x1", "fp8", True,
     "e4m3e4m3", "warpgroupsize2x1x1"),
    ("sm75_xmma_gemm_s8s8_s32s32_tn_imma", "int8", True, "s8s8", "imma"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_"
     "stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn", "tf32", True, "tf32f32",
     "tensor16x8x8"),
    # fp32 operands on tensor cores are TF32.
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x16_tensor16x8x8_kernel", "tf32", True,
     "f32f32", "tensor16x8x8"),
    # Classic BLAS letters: SIMT kernels.
    ("volta_sgemm_128x64_nn", "fp32", False, "sgemm", "sgemm"),
    ("ampere_sgemm_32x32_sliced1x4_tn", "fp32", False, "sgemm", "sgemm"),
    ("volta_dgemm_128x64_nn", "fp64", False, "dgemm", "dgemm"),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "fp32", False, "scudnn", "scudnn"),
    ("void cudnn::detail::implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, true>(int)",
     "fp32", False, "sgemm", "sgemm"),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_"
     "8x5_nn_align1::Params)", "fp32", False, "sgemm", "simt"),
    ("ampere_gcgemm_64x64_nt", None, False, None, "gcgemm"),  # complex: not one of the dtypes
    # cuDNN's own templated convolution kernels (FP32 CNN training on Volta/Turing): the first
    # element type, on the CUDA cores.
    ("void cudnn::detail::wgrad_alg0_engine<float, 128, 6, 8, 3, 3, 5, false, 512>(int, int, int, float const*, "
     "int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)",
     "fp32", False, "float", "wgrad_alg0_engine"),
    ("void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>(int, int, int, float const*, int, "
     "float const*, int, float*, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, "
     "int, int)", "fp32", False, "float", "dgrad_engine"),
    ("void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::"
     "WinogradDataParams<float, float>)", "fp32", False, "float", "winogradforwarddata4x4"),
    ("void cudnn::cnn::wgrad2d_grouped_direct_kernel<false, true, __half, __half, float>(cudnn::cnn::"
     "WgradGroupedDirectParams, __half const*, __half const*, float*, float, float)", "fp16", False, "__half",
     "wgrad2d_grouped_direct_kernel"),
    # Not a convolution: a layout or norm kernel of cuDNN says nothing about math.
    ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::"
     "nchw2nhwc_params_t<float>, float const*, float*)", None, None, None, None),
    ("void cudnn::detail::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float "
     "const*)", None, None, None, None),
    # Instruction cores: <accumulator letter><shape>gemm.
    ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1>(cutlass_80_tensorop_"
     "s1688gemm_256x128_32x3_nn_align1::Params)", "tf32", True, "s1688gemm", "tensorop"),
    ("turing_s1688gemm_fp16_128x128_nn", "fp16", True, "s1688gemm", "s1688gemm"),  # Turing HMMA
    ("cutlass_75_tensorop_s1688gemm_64x64_nn_align1", "fp16", True, "s1688gemm", "tensorop"),
    ("cutlass_tensorop_s1688tf32gemm_256x128_16x3_nn_align4", "tf32", True, "s1688tf32gemm", "tensorop"),
    ("ampere_h16816gemm_128x128_ldg8_stages_64x3_nn", "fp16", True, "h16816gemm", "h16816gemm"),
    ("turing_h1688gemm_128x128_ldg8_nn", "fp16", True, "h1688gemm", "h1688gemm"),
    ("volta_s884gemm_128x128_ldg8_f2f_nn", "fp16", True, "s884gemm", "s884gemm"),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", "bf16", True, "bf16", "s16816gemm"),
    ("turing_i8816gemm_int8_128x128_ldg16_nt", "int8", True, "i8816gemm", "i8816gemm"),
    ("ampere_int8_i16832gemm_int8_128x128_ldg16_stages_64x3_nt", "int8", True, "int8", "i16832gemm"),
    ("trt_volta_h884cudnn_256x128_ldg8_relu_exp_medium_nhwc_tn_v1", "fp16", True, "h884cudnn", "h884cudnn"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>"
     "(T1::Params)", "bf16", True, "bf16", "wmma"),
    # Data type words; fp8 is a tensor-core-only format.
    ("sm90_fp8_gemm_e5m2_kernel", "fp8", True, "fp8", "fp8"),
    ("cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_bf16_bf16_128x128x128_1x1x1_0_tnn_align16",
     "fp8", True, "e4m3", "tensorop"),
    ("void cutlass::device_kernel<vllm::cutlass_3x_gemm_fp8<cutlass::float_e4m3_t, cutlass::bfloat16_t, "
     "vllm::ScaledEpilogue>::GemmKernel>(T1::Params)", "fp8", True, "fp8", "fp8"),
    # gemv: the first floating type among the template arguments; never tensor cores.
    ("void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, "
     "cublasGemvParams<cublasGemvTensorStridedBatched<float const>>>(int)", "fp32", False, "float", "gemv"),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4>(T13)",
     "bf16", False, "__nv_bfloat16", "gemv"),
    # The name does not say.
    # cuBLAS nvjet: one letter per type (operand, compute, output): BF16 and FP16 tensor-core GEMMs.
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "bf16", True, "tst", "nvjet"),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN", "fp16", True, "hsh", "nvjet"),
    ("void marlin::Marlin<256, 1, 8, 8, 4, 8, false, 4>(const int4 *)", None, None, None, None),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "std::array<char *, 1>>(int, T2, T3)", None, None, None, None),
]


@pytest.mark.parametrize("name, dtype, tensor, dtype_token, tensor_token", CASES)
def test_math_mode(name, dtype, tensor, dtype_token, tensor_token):
    m = math_mode(name)
    assert (m.dtype, m.tensor_cores, m.dtype_token, m.tensor_core_token) == (
        dtype, tensor, dtype_token, tensor_token)
    assert m.dtype is None or m.dtype in DTYPES
    # The deciding tokens are words of the name.
    for token in (m.dtype_token, m.tensor_core_token):
        assert token is None or token in name.lower()


def test_template_arguments_do_not_decide_a_non_gemv_kernel():
    # "float" in the arguments of a non-gemv kernel says nothing about its math.
    assert math_mode("void my_kernel<float, __nv_bfloat16>(float *)").dtype is None


# The operand type apart from the accumulator and output: an "Fp32"/"f32" in a name is often
# only the accumulator. (name, operand dtype, accumulator, scaling, tensor cores)
PRECISION = [
    # TensorRT-LLM generated kernels: {gemm|bmm}_{output}_{A}{B}_{accumulator}.
    ("bmm_Bfloat16_E4m3E4m3_Fp32_t128x8x128u2_s8_et64x8_m64x8x32_c1x1x1_rM_TN_transOut_noShfl_dsFp8_sm100f",
     "fp8", "fp32", None, True),
    ("bmm_E2m1_E2m1E2m1_Fp32_t128x64x256_s6_et128x64_m128x64x64_cga1x1x1_16dp256b_TN_transOut_schedS_sm100a",
     "fp4", "fp32", "nv", True),
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x64x256_s3_et128x64_m128x64x32_cga1x1x1_16dp256b_TN_transOut_sm100f",
     "fp8", "fp32", "mx", True),
    ("Gemm_Bfloat16_E4m3E4m3_Fp32_t128x16x128u2_et64x16_m64x16x32_cga1x1x1_16dp256b_s6_TN_transOut_sm100a",
     "fp8", "fp32", None, True),
    # cuBLAS nvjet: A/B, C, compute, D letters; the block scales at the end.
    ("nvjet_qqtst_128x128_128x6_1x1_v_bz_TNT", "fp8", "fp32", None, True),
    ("nvjet_sm100_ootst_128x256_256x4_2x1_2cta_v_bz_Avec16UE4M3_Bvec16UE4M3_TNT", "fp4", "fp32", "nv", True),
    ("nvjet_sm100_ootst_128x256_256x4_2x1_2cta_v_bz_Avec32UE8M0_Bvec32UE8M0_TNT", "fp4", "fp32", "mx", True),
    # CUTLASS 3 block-scaled: {scale}x{data} operands, then the accumulator.
    ("cutlass3x_sm100_bstensorop_s256x256x64gemm_block_scaled_ue4m3xf4_ue4m3xf4_f32_bf16_bf16_256x256x256_0_tnn",
     "fp4", "fp32", "nv", True),
    ("cutlass3x_sm100_bstensorop_gemm_ue8m0xe2m1_ue8m0xe2m1_f32_void_bf16_128x128x256_1x1x1_0_tnt_align32_1sm",
     "fp4", "fp32", "mx", True),
    ("cutlass3x_sm100_bstensorop_gemm_ue8m0xe4m3_ue8m0xe4m3_f32_void_bf16_128x128x128_1x1x1_0_tnt_align32_1sm",
     "fp8", "fp32", "mx", True),
    ("cutlass3x_sm90_tensorop_s64x128x16gemm_bf16_bf16_f32_bf16_bf16_128x128x64_1x1x1_0_tnn_align8_warpspecialized",
     "bf16", "fp32", None, True),
    # xmma: operand pair, then output and accumulator.
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
     "__5x_cublas", "bf16", "fp32", None, True),
    ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n_tilesize128x128x128_warpgroupsize2x1x1", "fp8", "fp32", None, True),
    ("sm86_xmma_fprop_implicit_gemm_indexed_wo_smem_f16f16_f16f32_f16_nhwckrsc_nhwc_tilesize128x16x32_stage4_"
     "warpsize4x1x1_g1_tensor16x8x16_kernel", "fp16", "fp32", None, True),
    # Instruction cores: the letter is the accumulator.
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn", "bf16", "fp32", None, True),
    ("volta_h884gemm_64x64_ldg8_nn", "fp16", "fp16", None, True),
    # True FP32: scalar FMA, classic BLAS letters, cuDNN FP32 convolutions.
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__51b"
     "_cublas", "fp32", "fp32", None, False),
    ("ampere_sgemm_32x32_sliced1x4_tn", "fp32", None, None, False),
    ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "fp32", None, None, False),
    ("turing_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "fp32", None, None, False),
    ("void cudnn::detail::dgrad2d_alg1_1<float, 0, 6, 6, 5, 4, 4, false, true>(int, int, int, float const*, int, "
     "float const*, int, float*, kernel_grad_params, unsigned long long, int, unsigned long long, int, float, int, "
     "int)", "fp32", None, None, False),
    ("void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, "
     "int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, "
     "int, float const*, float const*, bool, int, int)", "fp32", None, None, False),
    # AMD Tensile/hipBLASLt: Ti To Tc (HPA) or one type, batched; MI.. means matrix cores.
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x128x64_MI16x16x1_SN_LDSB1_AFC1_AFEM1", "bf16", "fp32",
     None, True),
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x16_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0", "fp16", "fp32", None, True),
    ("Cijk_Ailk_Bljk_I8II_BH_MT128x128x64_MI32x32x16x1", "int8", "int32", None, True),
    ("Cijk_Ailk_Bljk_SB_MT16x16x16_SE_AF0EM1_AMAS2_ASEM1_BL0_DTL0_EPS0_FL0_GRVW2_GSU1_ISA000_K1_TT2_2_USFGRO0_VAW1",
     "fp32", "fp32", None, False),
    # Composable kernel: the element type among the template arguments; XDL means matrix cores.
    ("void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor, "
     "ck::bhalf_t, ck::bhalf_t, float>, true, 2>(int)", "bf16", None, None, True),
]


@pytest.mark.parametrize(("name", "dtype", "accumulator", "scaling", "tensor"), PRECISION)
def test_operand_type_apart_from_the_accumulator(name, dtype, accumulator, scaling, tensor):
    m = math_mode(name)
    assert (m.dtype, m.accumulator, m.scaling, m.tensor_cores) == (dtype, accumulator, scaling, tensor)
    # Reduced-precision operands on tensor cores are never advised "use BF16".
    assert m.reduced_precision is (dtype not in ("fp32", "tf32", "fp64"))


def test_mixed_inputs_run_at_the_wider_operand():
    m = math_mode("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x64x256_s3_et128x64_m128x64x32_cga1x1x1_sm100f")
    assert m.operands == ("fp4", "fp8") and m.dtype == "fp8"
    assert m.describe() == "MXFP4/FP8 (block-scaled) operands, FP32 accumulation"
