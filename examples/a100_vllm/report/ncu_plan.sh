#!/bin/sh
# Nsight Compute plan written by nsys-llm-explain: one ncu run per kernel.
# Usage: sh ncu_plan.sh <the command you profiled with nsys, and its arguments>
# --devices is the device id as the trace numbers it; drop it if CUDA_VISIBLE_DEVICES remaps.
# --launch-skip is counted from the first launch of the capture, but ncu counts launches
# from the start of the process: if the capture began later (nsys --capture-range or
# --delay, a profiler schedule, a capture of a later step), add the launches that ran
# before it, as each kernel's 'launch counting' line says.
set -eu
if [ "$#" -eq 0 ]; then echo "usage: sh ncu_plan.sh <command> [args...]" >&2; exit 2; fi

# 1. ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn
# why: #1 by GPU time (66.566 ms in 1,525 calls, 31.1% of kernel time); matrix work: speed of light with roofline charts; skips the 152 of 1525 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z58ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tnv$' \
  --launch-skip 152 --launch-count 1 \
  --section SpeedOfLight --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --export ncu_01_gemm --force-overwrite \
  "$@"

# 2. sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_stage3_warpsize2x2x1_tensor16x8x16_kernel
# why: #2 by GPU time (57.560 ms in 2,928 calls, 26.9% of kernel time); matrix work: speed of light with roofline charts; skips the 293 of 2928 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z99sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_stage3_warpsize2x2x1_tensor16x8x16_kernelv$' \
  --launch-skip 293 --launch-count 1 \
  --section SpeedOfLight --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --export ncu_02_gemm --force-overwrite \
  "$@"

# 3. void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloa...
# why: #3 by GPU time (33.669 ms in 1,416 calls, 15.8% of kernel time); matrix work: speed of light with roofline charts; skips the 122 of 1416 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z24flash_fwd_splitkv_kernelv$' \
  --launch-skip 122 --launch-count 1 \
  --section SpeedOfLight --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --export ncu_03_attention --force-overwrite \
  "$@"

# 4. void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_ali...
# why: #4 by GPU time (18.058 ms in 1,464 calls, 8.4% of kernel time); matrix work: speed of light with roofline charts; skips the 146 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z7Kernel2v$' \
  --launch-skip 146 --launch-count 1 \
  --section SpeedOfLight --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --export ncu_04_gemm --force-overwrite \
  "$@"

# 5. void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)
# why: #5 by GPU time (12.379 ms in 2,928 calls, 5.8% of kernel time); memory-bound: memory workload analysis; skips the 292 of 2928 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z25fused_add_rms_norm_kernelv$' \
  --launch-skip 292 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --export ncu_05_norm --force-overwrite \
  "$@"

# 6. void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >...
# why: #6 by GPU time (8.784 ms in 48 calls, 4.1% of kernel time); matrix work: speed of light with roofline charts; skips the 24 of 48 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z16flash_fwd_kernelv$' \
  --launch-skip 24 --launch-count 1 \
  --section SpeedOfLight --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --export ncu_06_attention --force-overwrite \
  "$@"

# 7. void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 con...
# why: #7 by GPU time (5.688 ms in 1,464 calls, 2.7% of kernel time); memory-bound: memory workload analysis; skips the 146 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z18act_and_mul_kernelv$' \
  --launch-skip 146 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --export ncu_07_activation_elementwise --force-overwrite \
  "$@"

# 8. void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)
# why: #8 by GPU time (4.323 ms in 1,464 calls, 2.0% of kernel time); memory-bound: memory workload analysis; skips the 147 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z23rotary_embedding_kernelv$' \
  --launch-skip 147 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --export ncu_08_activation_elementwise --force-overwrite \
  "$@"

# 9. void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat1...
# why: #9 by GPU time (4.284 ms in 1,464 calls, 2.0% of kernel time); memory-bound: memory workload analysis; skips the 146 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z30reshape_and_cache_flash_kernelv$' \
  --launch-skip 146 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --export ncu_09_memory --force-overwrite \
  "$@"

# 10. void vllm::copy_blocks_kernel<c10::BFloat16>(long*, long*, long const*, int)
# why: #10 by GPU time (1.107 ms in 61 calls, 0.5% of kernel time); memory-bound: memory workload analysis; skips the 7 of 61 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z18copy_blocks_kernelv$' \
  --launch-skip 7 --launch-count 1 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --export ncu_10_memory --force-overwrite \
  "$@"
