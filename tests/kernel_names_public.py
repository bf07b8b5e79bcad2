# ruff: noqa: E501 - real kernel names are long; they stay whole so they match what nsys shows
"""Real-world kernel names (demangled, as Nsight Systems shows them) with the category a
reader expects, written from public vLLM, SGLang, TensorRT-LLM, PyTorch, cuBLAS, CUTLASS,
FlashAttention, FlashInfer and NCCL sources and published profiles."""

from __future__ import annotations

KNOWN_KERNELS: tuple[tuple[str, str], ...] = (
    # cuBLAS / cuBLASLt
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "gemm",
    ),
    (
        "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x32_stage3_warpsize2x4x1_tensor16x8x16_kernel",
        "gemm",
    ),
    ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", "gemm"),
    ("ampere_sgemm_128x64_nn", "gemm"),
    ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "gemm"),
    ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN", "gemm"),
    (
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true, false, false>(cublasLt::cublasSplitKParams<float>, const float *, const __nv_bfloat16 *, __nv_bfloat16 *, const float *, const float *, const __nv_bfloat16 *, const float *, __nv_bfloat16 *, void *, long, float *, int *)",
        "gemm",
    ),
    (
        "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4, false, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13, T6, T6)",
        "gemm",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(T1::Params)",
        "gemm",
    ),
    (
        "void cutlass::device_kernel<vllm::cutlass_3x_gemm_fp8<cutlass::float_e4m3_t, cutlass::bfloat16_t, vllm::ScaledEpilogue>::GemmKernel>(T1::Params)",
        "gemm",
    ),
    (
        "void marlin::Marlin<256, 1, 8, 8, 4, 8, false, 4>(const int4 *, const int4 *, int4 *, int4 *, const int4 *, const int *, int, int, int, int, int *)",
        "gemm",
    ),
    (
        "void deep_gemm::fp8_gemm_kernel<128u, 128u, 128u, 4u, 128u, 4u>(__nv_bfloat16 *, float *, int *, unsigned int, CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap)",
        "gemm",
    ),
    ("_w8a8_block_fp8_matmul", "gemm"),
    ("triton_tem_fused_mm_0", "gemm"),
    # attention
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, false, false, false, true, false, false>(flash::Flash_fwd_params)",
        "attention",
    ),
    (
        "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t>>, false, true, false, false, true, false, false, false>(flash::Flash_fwd_params)",
        "attention",
    ),
    (
        "void flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t>>, 4, 7, false>(flash::Flash_fwd_params)",
        "attention",
    ),
    (
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1>>, cute::tuple<cute::C<128>, cute::C<128>, cute::C<128>>, 128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, false, false, false, true, true, false, true, false, true, true, false>>>>(T1::Params)",
        "attention",
    ),
    (
        "void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits<(flashinfer::MaskMode)1, 128u, 1u, 8u, 4u, 4u, 1u, (flashinfer::PosEncodingMode)0, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int, flashinfer::DefaultAttention<false, false, false, false>>, flashinfer::BatchPrefillPagedParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>>(T2)",
        "attention",
    ),
    (
        "void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0, 2u, 4u, 8u, 16u, 1u, 8u, flashinfer::DefaultAttention<false, false, false, false>, flashinfer::BatchDecodeParams<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>>(T8)",
        "attention",
    ),
    (
        "void flashinfer::MergeStatesKernel<8u, 16u, 1u, 4u, __nv_bfloat16, __nv_bfloat16>(T5 *, float *, T6 *, float *, unsigned int, unsigned int)",
        "attention",
    ),
    (
        "void vllm::paged_attention_v1_kernel<unsigned short, unsigned short, 128, 16, 128, (vllm::Fp8KVCacheDataType)0, false>(T1 *, const T1 *, const T2 *, const T2 *, int, float, const int *, const int *, int, const float *, int, int, int, const float *, const float *)",
        "attention",
    ),
    (
        "void vllm::paged_attention_v2_reduce_kernel<unsigned short, 128, 128, 512>(T1 *, const float *, const float *, const T1 *, const int *, int)",
        "attention",
    ),
    (
        "void tensorrt_llm::kernels::mmha::masked_multihead_attention_kernel<unsigned short, unsigned short, tensorrt_llm::kernels::KVBlockArray, 128, 128, 256, false, false, false, false, false, true, 1, false, true, 0, 0>(tensorrt_llm::kernels::Multihead_attention_params<unsigned short, false>, T3)",
        "attention",
    ),
    ("fmha_v2_flash_attention_fp16_64_128_S_qkv_128_sm90_kernel_nl_tiled", "attention"),
    ("kernel_mha", "attention"),
    ("xqa_kernel_dt_bf16_d_128_beam_1_kvt_bf16_nqpkv_8_m_8_sm_90", "attention"),
    (
        "fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)",
        "attention",
    ),
    ("_fwd_kernel_stage1", "attention"),
    ("_fwd_grouped_kernel_stage1", "attention"),
    ("kernel_unified_attention_2d", "attention"),
    (
        "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true, flash::SharedStorageMLA<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>>>(Flash_fwd_mla_params)",
        "attention",
    ),
    # MoE
    ("fused_moe_kernel", "moe"),
    (
        "void vllm::moe::topkGatingSoftmax<8, 64, 4, 16, int>(const float *, const bool *, float *, int, T5 *, int *, int, int, int)",
        "moe",
    ),
    (
        "void vllm::moe::moe_align_block_size_kernel<int>(const T1 *, int *, int *, int *, int, int, int, int, unsigned long, int *)",
        "moe",
    ),
    ("void vllm::moe::moe_sum_kernel<__nv_bfloat16, 8>(T1 *, const T1 *, int)", "moe"),
    (
        "void tensorrt_llm::kernels::cutlass_kernels::expandInputRowsKernel<__nv_bfloat16, false>(const T1 *, T1 *, const float *, float *, const int *, int *, long, long, long, long, const long *)",
        "moe",
    ),
    (
        "void cutlass::Kernel<cutlass::gemm::kernel::MoeFCGemm<cutlass::gemm::threadblock::MmaMultistage<cutlass::gemm::GemmShape<128, 128, 64>>, cutlass::epilogue::threadblock::Epilogue, cutlass::gemm::threadblock::GemmBatchedIdentityThreadblockSwizzle, (cutlass::gemm::kernel::GroupScheduleMode)0, false>>(T1::Params)",
        "moe",
    ),
    (
        "void deep_gemm::fp8_gemm_kernel<4096u, 7168u, 128u, 128u, 128u, 8u, 128u, 128u, 1u, 8u, 4u, 1u, (deep_gemm::GemmType)1>(__nv_bfloat16 *, int *, unsigned int, CUtensorMap, CUtensorMap, CUtensorMap, CUtensorMap)",
        # DeepGEMM's grouped (MoE) GEMM differs from the dense one only in a template
        # argument, (deep_gemm::GemmType)1; by its function name it is a GEMM.
        "gemm",
    ),
    # norms
    (
        "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(T1 *, const T1 *, long, const T1 *, float, int, int)",
        "norm",
    ),
    (
        "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(T1 *, T1 *, const T1 *, float, int, int)",
        "norm",
    ),
    (
        "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(T2 *, T2 *, T2 *, unsigned int, unsigned int, unsigned int, float, float)",
        "norm",
    ),
    (
        "void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, T2, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)",
        "norm",
    ),
    (
        "void at::native::<unnamed>::RowwiseMomentsCUDAKernel<float, float>(long, T2, const T1 *, T2 *, T2 *)",
        "norm",
    ),
    (
        "void tensorrt_llm::kernels::generalRmsNorm<__nv_bfloat16, float, false, false, int8_t>(const T1 *, const T1 *, const T1 *, T1 *, float, const float *, float *, T5 *, int, int)",
        "norm",
    ),
    # activation / elementwise
    (
        "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(T1 *, const T1 *, int)",
        "activation_elementwise",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase &, at::native::GeluType)::[lambda() (instance 2)]::operator ()() const::[lambda() (instance 4)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)], std::array<char *, 2>>(int, T2, T3)",
        "activation_elementwise",
    ),
    (
        "void at::native::elementwise_kernel<128, 2, void at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)",
        "activation_elementwise",
    ),
    (
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(const long *, T1 *, T1 *, const T1 *, int, long, long, int, int, int)",
        "activation_elementwise",
    ),
    (
        "void vllm::dynamic_per_token_scaled_fp8_quant_kernel<c10::BFloat16, c10::Float8_e4m3fn>(T2 *, float *, const T1 *, const float *, int)",
        "activation_elementwise",
    ),
    (
        "void tensorrt_llm::kernels::applyBiasRopeUpdateKVCache<__nv_bfloat16, __nv_bfloat16, false, false>(tensorrt_llm::kernels::QKVPreprocessingParams<__nv_bfloat16, tensorrt_llm::kernels::KVBlockArray>)",
        "activation_elementwise",
    ),
    (
        "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &silu>(T1 *, const T1 *, int)",
        "activation_elementwise",
    ),
    # reductions
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>>(T3)",
        "reduction",
    ),
    (
        "void <unnamed>::softmax_warp_forward<float, float, float, 6, false, false>(T2 *, const T1 *, int, int, int, const bool *, int, bool)",
        "reduction",
    ),
    (
        "void at::native::<unnamed>::cunn_SoftMaxForward<4, float, float, float, at::native::<unnamed>::SoftMaxForwardEpilogue>(T4 *, const T2 *, int)",
        "reduction",
    ),
    (
        "void at_cuda_detail::cub::DeviceScanKernel<at_cuda_detail::cub::DeviceScanPolicy<long>::Policy600, const long *, long *, at_cuda_detail::cub::ScanTileState<long, true>, std::plus<long>, at_cuda_detail::cub::NullType, int>(T2, T3, T4, int, T5, T6, T7)",
        "reduction",
    ),
    # sampling
    (
        "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<const T1, T2>, T2, T2, bool, T2, T2, at::cuda::detail::TensorInfo<T1, T2>, T2, at::cuda::detail::TensorInfo<long, T2>, T2, T1 *)",
        "sampling",
    ),
    (
        "void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, (cub::BlockScanAlgorithm)0, (cub::BlockReduceAlgorithm)2, 4u, false, float, int>(T6 *, T7 *, T7 *, T7 *, T6 *, float, T7 *, T6 *, unsigned int, unsigned int)",
        "sampling",
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4, 4>>(T3)",
        "sampling",
    ),
    (
        "void at_cuda_detail::cub::DeviceRadixSortOnesweepKernel<at_cuda_detail::cub::DeviceRadixSortPolicy<float, long, int>::Policy800, true, float, long, int, int, at_cuda_detail::cub::detail::identity_decomposer_t>(T6 *, T6 *, T5 *, const T5 *, T3 *, T3 *, T4 *, const T4 *, T5, int, int, T8)",
        "sampling",
    ),
    (
        "void at::native::<unnamed>::multinomial_with_replacement_kernel_impl(at::Tensor &, const at::Tensor &, long, bool, std::optional<at::Generator>)",
        "sampling",
    ),
    # communication
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096UL>)", "communication"),
    (
        "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm *, unsigned long, ncclWork *)",
        "communication",
    ),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096UL>)", "communication"),
    (
        "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData *, vllm::RankSignals, vllm::Signal *, T1 *, int, int)",
        "communication",
    ),
    (
        "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 8, true, false>(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams)",
        "communication",
    ),
    (
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4 *, float *, int *, long *, float *, int *, int *, const int4 *, const float *, const long *, const float *, const bool *, const int *, int, int, int, int, int, int, int, void **, int, int, int)",
        "communication",
    ),
    # memory
    (
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(const T1 *, const T1 *, T2 *, T2 *, const long *, long, long, long, int, int, int, const float *, const float *)",
        "memory",
    ),
    (
        "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *, 2>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>>(int, T1, T2, T3, T4, T5, T6)",
        "cast_copy",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char *, 1>>(int, T2, T3)",
        "memory",
    ),
    (
        "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType<4>, unsigned int, 1, 128, 1, 16, 4>(char *, at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, at::native::<unnamed>::TensorSizeStride<T2, 4>, int, T2)",
        "memory",
    ),
    (
        "void at::native::index_elementwise_kernel<128, 4, void at::native::gpu_index_kernel<void at::native::index_kernel_impl<at::native::OpaqueType<2>>(at::TensorIteratorBase &, c10::ArrayRef<long>, c10::ArrayRef<long>)::[lambda(char *, const char *, long) (instance 1)]>(at::TensorIteratorBase &, c10::ArrayRef<long>, c10::ArrayRef<long>, const T1 &, bool)::[lambda(int) (instance 1)]>(long, T3)",
        "memory",
    ),
    (
        "void at::native::<unnamed>::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<T1, T3>, at::cuda::detail::TensorInfo<const T1, T3>, at::cuda::detail::TensorInfo<const T2, T3>, int, int, T3, T3, long)",
        "memory",
    ),
    (
        "void at::native::index_put_with_sort_kernel<c10::BFloat16, c10::BFloat16>(long *, long *, T1 *, T2 *, long, long, long, long, bool)",
        "memory",
    ),
    (
        "void at::native::vectorized_gather_kernel<16, long>(char *, char *, T2 *, int, long, long, long, long, bool)",
        "memory",
    ),
    ("void vllm::copy_blocks_kernel<unsigned short>(long *, long *, const long *, int)", "memory"),
    # compiler-generated fusions
    ("triton_poi_fused_add_mul_silu_2", "compiler_fused"),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", "compiler_fused"),
    ("nvfuser_none_f0_c0_r0_g0", "compiler_fused"),
)
