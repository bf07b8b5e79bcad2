# ruff: noqa: E501 - real kernel names are long; they stay whole so they match what the traces show
"""Kernel names as they appear in the real traces of shared/traces (Nsight Systems exports
and PyTorch profiler traces; see its README for their sources), with the category each
must get. Names only: the traces themselves are not part of the project."""

from __future__ import annotations

TRACE_KERNELS: tuple[tuple[str, str], ...] = (
    # fuser_gemm_report1.sqlite
    ('<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>, <unnamed>::TensorMap, <unnamed>::TensorMap, <unnamed>::Tensor<<unnamed>::__half, (int)2, (int)2>)', 'compiler_fused'),
    # fuser_gemm_report1.sqlite
    ('nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN', 'gemm'),
    # fuser_gemm_report1.sqlite
    ('void at::native::<unnamed>::distribution_elementwise_grid_stride_kernel<float, (int)4, void at::native::templates::cuda::normal_and_transform<c10::Half, float, at::CUDAGeneratorImpl *, void at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl *>(const at::TensorBase &, double, double, T1)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 3)]::operator ()() const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, T3, T4)::[lambda(curandStatePhilox4_32_10 *) (instance 2)], void at::native::<unnamed>::distribution_nullary_kernel<c10::Half, float, float4, at::CUDAGeneratorImpl *, void at::native::templates::cuda::normal_and_transform<c10::Half, float, at::CUDAGeneratorImpl *, void at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl *>(const at::TensorBase &, double, double, T1)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 3)]::operator ()() const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, T3, T4)::[lambda(curandStatePhilox4_32_10 *) (instance 2)], void at::native::templates::cuda::normal_kernel<at::CUDAGeneratorImpl *>(const at::TensorBase &, double, double, T1)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 3)]::operator ()() const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, T4, const T5 &, T6)::[lambda(int, float) (instance 1)]>(int, at::PhiloxCudaState, T3, T4)', 'activation_elementwise'),
    # fuser_gemm_report1.sqlite
    ('void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, at::native::and_kernel_cuda(at::TensorIterator &)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 12)]::operator ()() const::[lambda(bool, bool) (instance 1)]>, unsigned int, bool, (int)4>>(T3)', 'reduction'),
    # fuser_gemm_report1.sqlite
    ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::CompareFunctor<c10::Half>, std::array<char *, (unsigned long)3>>(int, T2, T3)', 'activation_elementwise'),
    # fuser_gemm_report1.sqlite
    ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::AUnaryFunctor<c10::Half, c10::Half, c10::Half, at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long)2>>(int, T2, T3)', 'activation_elementwise'),
    # fuser_gemm_report1.sqlite
    ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<c10::Half>, std::array<char *, (unsigned long)1>>(int, T2, T3)', 'memory'),
    # nsysai_h100_2gpu_1s.sqlite
    ('sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas', 'gemm'),
    # nsysai_h100_2gpu_1s.sqlite
    ('sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas', 'gemm'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void <unnamed>::elementwise_kernel_with_index<int, at::native::arange_cuda_out(const c10::Scalar &, const c10::Scalar &, const c10::Scalar &, at::Tensor &)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 4)]::operator ()() const::[lambda(long) (instance 1)]>(T1, T2, function_traits<T2>::result_type *)', 'memory'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void <unnamed>::softmax_warp_forward<float, float, float, (int)6, (bool)0, (bool)0>(T2 *, const T1 *, int, int, int, const bool *, int, bool)', 'reduction'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<at::native::<unnamed>::OpaqueType<(unsigned int)4>, unsigned int, (int)1, (int)128, (int)1, (int)16, (int)4>(char *, at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, at::native::<unnamed>::TensorSizeStride<T2, (unsigned int)4>, int, T2)', 'memory'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<at::native::<unnamed>::masked_fill_kernel(at::TensorIterator &, const c10::Scalar &)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float, bool) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)', 'memory'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<long>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)', 'activation_elementwise'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)]>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)', 'cast_copy'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void at::native::vectorized_elementwise_kernel<(int)4, at::native::tanh_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 2)]::operator ()() const::[lambda() (instance 2)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)', 'activation_elementwise'),
    # nsysai_h100_2gpu_1s.sqlite
    ('void at::native::vectorized_gather_kernel<(int)16, long>(char *, char *, T2 *, int, long, long, long, long, bool)', 'memory'),
    # pipit_cloverleaf.sqlite
    ('void clover::par_ranged1d_kernel<build_field(global_variables &)::[lambda(int) (instance 1)]>(clover::Range1d, T1)', 'other'),
    # pipit_cloverleaf.sqlite
    ('void clover::par_ranged2d_kernel<PdV_kernel(bool, int, int, int, int, double, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &)::[lambda(int, int) (instance 1)]>(clover::Range2d, T1)', 'other'),
    # pipit_cloverleaf.sqlite
    ('void clover::par_reduce_kernel<calc_dt_kernel(global_variables &, int, int, int, int, double, double, double, double, double, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer1D<double> &, clover::Buffer1D<double> &, clover::Buffer1D<double> &, clover::Buffer1D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, clover::Buffer2D<double> &, double &, int &, double &, double &, int &, int &, int &)::[lambda(int) (instance 1)]>(T1)', 'reduction'),
    # pipit_saxpy_mpi.sqlite
    ('saxpy(double *, double *, double *, double, int)', 'activation_elementwise'),
    # hf_qwen1.5_0.5b_h100.json.gz
    ('sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas', 'gemm'),
    # hf_qwen1.5_0.5b_h100.json.gz
    ('void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 4, 64, 64>(at::native::(anonymous namespace)::OpaqueType<2u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 64, 64>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)', 'memory'),
    # hf_qwen1.5_0.5b_h100.json.gz
    ('void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)', 'memory'),
    # hf_qwen1.5_0.5b_h100.json.gz
    ('void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)', 'activation_elementwise'),
    # hf_qwen1.5_0.5b_h100.json.gz
    ('void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)', 'cast_copy'),
    # hf_qwen1.5_0.5b_h100.json.gz
    ('void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(cutlass_80_simt_sgemm_128x32_8x5_nn_align1::Params)', 'gemm'),
    # hf_qwen1.5_0.5b_h100.json.gz
    ('void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false>(pytorch_flash::Flash_fwd_params)', 'attention'),
    # hta_a100_80gb_rank0.json.gz
    ('ampere_sgemm_128x64_nn', 'gemm'),
    # hta_a100_80gb_rank0.json.gz
    ('ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)', 'communication'),
    # hta_a100_80gb_rank0.json.gz
    ('split_embedding_backward_codegen_find_long_segments(at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, int, int, bool)', 'memory'),
    # hta_a100_80gb_rank0.json.gz
    ('triton__0d1d2d', 'compiler_fused'),
    # hta_a100_80gb_rank0.json.gz
    ('void at::native::unrolled_elementwise_kernel<at::native::CUDAFunctor_add<double>, at::detail::Array<char*, 3>, TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, at::native::memory::StoreWithCast<1> >(int, at::native::CUDAFunctor_add<double>, at::detail::Array<char*, 3>, TrivialOffsetCalculator<2, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<2>, at::native::memory::StoreWithCast<1>)', 'activation_elementwise'),
    # hta_a100_80gb_rank0.json.gz
    ('void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(double)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#6}::operator()() const::{lambda(double)#1}, at::detail::Array<char*, 2>)', 'activation_elementwise'),
    # hta_a100_80gb_rank0.json.gz
    ('void at::native::vectorized_elementwise_kernel<4, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)', 'activation_elementwise'),
    # hta_a100_80gb_rank0.json.gz
    ('void cub::DeviceCompactInitKernel<cub::ReduceByKeyScanTileState<int, int, true>, int*>(cub::ReduceByKeyScanTileState<int, int, true>, int, int*)', 'other'),
    # hta_a100_80gb_rank0.json.gz
    ('void cub::DeviceRadixSortExclusiveSumKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, int>(int*)', 'sampling'),
    # hta_a100_80gb_rank0.json.gz
    ('void cub::DeviceRadixSortHistogramKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int>(int*, long const*, int, int, int)', 'sampling'),
    # hta_a100_80gb_rank0.json.gz
    ('void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*, cub::ConstantInputIterator<int, int>, int*, int*, cub::Equality, cub::Sum, int>::PtxReduceByKeyPolicy, long*, long*, cub::ConstantInputIterator<int, int>, int*, int*, cub::ReduceByKeyScanTileState<int, int, true>, cub::Equality, cub::Sum, int>(long*, long*, cub::ConstantInputIterator<int, int>, int*, int*, cub::ReduceByKeyScanTileState<int, int, true>, int, cub::Equality, cub::Sum, int)', 'reduction'),
    # hta_a100_80gb_rank0.json.gz
    ('void cub::DeviceScanInitKernel<cub::ScanTileState<int, true> >(cub::ScanTileState<int, true>, int)', 'reduction'),
    # hta_a100_80gb_rank0.json.gz
    ('void cub::DeviceScanKernel<cub::AgentScanPolicy<128, 15, int, (cub::BlockLoadAlgorithm)3, (cub::CacheLoadModifier)0, (cub::BlockStoreAlgorithm)3, (cub::BlockScanAlgorithm)2, cub::MemBoundScaling<128, 15, int> >, int*, int*, cub::ScanTileState<int, true>, cub::Sum, cub::NullType, int>(int*, int*, cub::ScanTileState<int, true>, int, cub::Sum, cub::NullType, int)', 'reduction'),
    # hta_a100_80gb_rank0.json.gz
    ('void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4>(cutlass_80_tensorop_s1688gemm_128x64_16x6_tn_align4::Params)', 'gemm'),
    # hta_a100_80gb_rank0.json.gz
    ('void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1>(cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1::Params)', 'gemm'),
    # hta_a100_80gb_rank0.json.gz
    ('void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)', 'gemm'),
    # hta_a100_80gb_rank0.json.gz
    ('void linearize_index_kernel<long>(at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>)', 'memory'),
    # hta_a100_80gb_rank0.json.gz
    ('void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, float, float, adamMode_t, float, int, int, int>(int, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, float, float, adamMode_t, float, int, int, int)', 'activation_elementwise'),
    # hta_a100_80gb_rank0.json.gz
    ('void permute_pooled_embs_kernel<float>(float const*, long const*, long const*, long const*, float*, long, long, long)', 'layout'),
    # hta_a100_80gb_rank0.json.gz
    ('void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, float const*, float const*, float*, void*, long, float*, int*)', 'gemm'),
    # hta_alexnet_a100.json.gz
    ('ampere_gcgemm_64x64_nt', 'gemm'),
    # hta_alexnet_a100.json.gz
    ('ampere_sgemm_32x32_sliced1x4_tn', 'gemm'),
    # hta_alexnet_a100.json.gz
    ('cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1', 'conv'),
    # hta_alexnet_a100.json.gz
    ('sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn', 'conv'),
    # hta_alexnet_a100.json.gz
    ('void at::native::(anonymous namespace)::adaptive_average_pool<float>(float const*, float*, int, int, int, int, long, long, long)', 'pooling'),
    # hta_alexnet_a100.json.gz
    ('void at::native::(anonymous namespace)::fused_dropout_kernel_vec<float, float, unsigned int, 1, 4, bool>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<bool, unsigned int>, unsigned int, float, at::PhiloxCudaState)', 'activation_elementwise'),
    # hta_alexnet_a100.json.gz
    ('void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*, long, long, long, int, int, int, int, int, int, int, int, int, int, float*, long*)', 'pooling'),
    # hta_alexnet_a100.json.gz
    ('void cask_cudnn::computeOffsetsKernel<false, false>(cask_cudnn::ComputeOffsetsParams)', 'conv'),
    # hta_alexnet_a100.json.gz
    ('void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)', 'layout'),
    # hta_alexnet_a100.json.gz
    ('void epilogue::impl::globalKernel<float, float, float, true, true>(int, int, long, float*, cublasLtEpilogue_t, int, float*, long, void*, long, long, long, float*, long, int*)', 'other'),
    # hta_alexnet_a100.json.gz
    ('void fft2d_c2r_32x32<float, false, false, 0u, false, false>(float*, float2 const*, int, int, int, int, int, int, int, int, int, float, float, cudnn::reduced_divisor, bool, float*, float*, int2, int, int)', 'fft'),
    # hta_alexnet_a100.json.gz
    ('void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int, int, int, int, int, int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)', 'fft'),
)
