#!/bin/sh
# Nsight Compute plan written by nsys-llm-explain: one ncu run per kernel.
# Usage: sh ncu_plan.sh <the command you profiled with nsys, and its arguments>
# Each run writes ncu_NN_*.ncu-rep (open it in ncu-ui) and ncu_NN_*.csv; merge the CSVs into
# the report with: nsys-llm-explain TRACE --out DIR --ncu <this folder>
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
rm -f ncu_01_gemm.ncu-rep ncu_01_gemm.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z58ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tnv$' \
  --launch-skip 152 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_01_gemm --force-overwrite \
  "$@"
if [ -f ncu_01_gemm.ncu-rep ]; then ncu --import ncu_01_gemm.ncu-rep --csv --page details --print-units base > ncu_01_gemm.csv; else echo "ncu_plan.sh: ncu_01_gemm: no kernel was profiled (see its launch counting line)" >&2; fi

# 2. sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_stage3_warpsize2x2x1_tensor16x8x16_kernel
# why: #2 by GPU time (57.560 ms in 2,928 calls, 26.9% of kernel time); matrix work: speed of light with roofline charts; skips the 293 of 2928 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_02_gemm.ncu-rep ncu_02_gemm.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z99sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_stage3_warpsize2x2x1_tensor16x8x16_kernelv$' \
  --launch-skip 293 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_02_gemm --force-overwrite \
  "$@"
if [ -f ncu_02_gemm.ncu-rep ]; then ncu --import ncu_02_gemm.ncu-rep --csv --page details --print-units base > ncu_02_gemm.csv; else echo "ncu_plan.sh: ncu_02_gemm: no kernel was profiled (see its launch counting line)" >&2; fi

# 3. void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloa...
# why: #3 by GPU time (33.669 ms in 1,416 calls, 15.8% of kernel time); matrix work: speed of light with roofline charts; skips the 122 of 1416 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_03_attention.ncu-rep ncu_03_attention.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z24flash_fwd_splitkv_kernelv$' \
  --launch-skip 122 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_03_attention --force-overwrite \
  "$@"
if [ -f ncu_03_attention.ncu-rep ]; then ncu --import ncu_03_attention.ncu-rep --csv --page details --print-units base > ncu_03_attention.csv; else echo "ncu_plan.sh: ncu_03_attention: no kernel was profiled (see its launch counting line)" >&2; fi

# 4. void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_ali...
# why: #4 by GPU time (18.058 ms in 1,464 calls, 8.4% of kernel time); matrix work: speed of light with roofline charts; skips the 146 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_04_gemm.ncu-rep ncu_04_gemm.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z7Kernel2v$' \
  --launch-skip 146 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_04_gemm --force-overwrite \
  "$@"
if [ -f ncu_04_gemm.ncu-rep ]; then ncu --import ncu_04_gemm.ncu-rep --csv --page details --print-units base > ncu_04_gemm.csv; else echo "ncu_plan.sh: ncu_04_gemm: no kernel was profiled (see its launch counting line)" >&2; fi

# 5. void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)
# why: #5 by GPU time (12.379 ms in 2,928 calls, 5.8% of kernel time); memory-bound: memory workload analysis; skips the 292 of 2928 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_05_norm.ncu-rep ncu_05_norm.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z25fused_add_rms_norm_kernelv$' \
  --launch-skip 292 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_05_norm --force-overwrite \
  "$@"
if [ -f ncu_05_norm.ncu-rep ]; then ncu --import ncu_05_norm.ncu-rep --csv --page details --print-units base > ncu_05_norm.csv; else echo "ncu_plan.sh: ncu_05_norm: no kernel was profiled (see its launch counting line)" >&2; fi

# 6. void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >...
# why: #6 by GPU time (8.784 ms in 48 calls, 4.1% of kernel time); matrix work: speed of light with roofline charts; skips the 24 of 48 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_06_attention.ncu-rep ncu_06_attention.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z16flash_fwd_kernelv$' \
  --launch-skip 24 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section SpeedOfLight_RooflineChart --section SpeedOfLight_HierarchicalTensorRooflineChart --section ComputeWorkloadAnalysis \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_06_attention --force-overwrite \
  "$@"
if [ -f ncu_06_attention.ncu-rep ]; then ncu --import ncu_06_attention.ncu-rep --csv --page details --print-units base > ncu_06_attention.csv; else echo "ncu_plan.sh: ncu_06_attention: no kernel was profiled (see its launch counting line)" >&2; fi

# 7. void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 con...
# why: #7 by GPU time (5.688 ms in 1,464 calls, 2.7% of kernel time); memory-bound: memory workload analysis; skips the 146 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_07_activation_elementwise.ncu-rep ncu_07_activation_elementwise.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z18act_and_mul_kernelv$' \
  --launch-skip 146 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_07_activation_elementwise --force-overwrite \
  "$@"
if [ -f ncu_07_activation_elementwise.ncu-rep ]; then ncu --import ncu_07_activation_elementwise.ncu-rep --csv --page details --print-units base > ncu_07_activation_elementwise.csv; else echo "ncu_plan.sh: ncu_07_activation_elementwise: no kernel was profiled (see its launch counting line)" >&2; fi

# 8. void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)
# why: #8 by GPU time (4.323 ms in 1,464 calls, 2.0% of kernel time); memory-bound: memory workload analysis; skips the 147 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_08_activation_elementwise.ncu-rep ncu_08_activation_elementwise.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z23rotary_embedding_kernelv$' \
  --launch-skip 147 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_08_activation_elementwise --force-overwrite \
  "$@"
if [ -f ncu_08_activation_elementwise.ncu-rep ]; then ncu --import ncu_08_activation_elementwise.ncu-rep --csv --page details --print-units base > ncu_08_activation_elementwise.csv; else echo "ncu_plan.sh: ncu_08_activation_elementwise: no kernel was profiled (see its launch counting line)" >&2; fi

# 9. void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat1...
# why: #9 by GPU time (4.284 ms in 1,464 calls, 2.0% of kernel time); memory-bound: memory workload analysis; skips the 146 of 1464 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_09_memory.ncu-rep ncu_09_memory.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z30reshape_and_cache_flash_kernelv$' \
  --launch-skip 146 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_09_memory --force-overwrite \
  "$@"
if [ -f ncu_09_memory.ncu-rep ]; then ncu --import ncu_09_memory.ncu-rep --csv --page details --print-units base > ncu_09_memory.csv; else echo "ncu_plan.sh: ncu_09_memory: no kernel was profiled (see its launch counting line)" >&2; fi

# 10. void vllm::copy_blocks_kernel<c10::BFloat16>(long*, long*, long const*, int)
# why: #10 by GPU time (1.107 ms in 61 calls, 0.5% of kernel time); memory-bound: memory workload analysis; skips the 7 of 61 launches in the first 10% of the capture's launches, profiles the next one
# launch counting: add the launches that ran before the capture, if it began after the process started
rm -f ncu_10_memory.ncu-rep ncu_10_memory.csv
ncu --target-processes all \
  --devices 0 \
  --kernel-name-base mangled \
  --kernel-name 'regex:^_Z18copy_blocks_kernelv$' \
  --launch-skip 7 --launch-count 1 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__sass_thread_inst_executed_op_dadd_pred_on.sum,sm__sass_thread_inst_executed_op_dmul_pred_on.sum,sm__sass_thread_inst_executed_op_dfma_pred_on.sum,sm__sass_thread_inst_executed_op_fadd_pred_on.sum,sm__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__sass_thread_inst_executed_op_ffma_pred_on.sum,sm__sass_thread_inst_executed_op_hadd_pred_on.sum,sm__sass_thread_inst_executed_op_hmul_pred_on.sum,sm__sass_thread_inst_executed_op_hfma_pred_on.sum \
  --export ncu_10_memory --force-overwrite \
  "$@"
if [ -f ncu_10_memory.ncu-rep ]; then ncu --import ncu_10_memory.ncu-rep --csv --page details --print-units base > ncu_10_memory.csv; else echo "ncu_plan.sh: ncu_10_memory: no kernel was profiled (see its launch counting line)" >&2; fi
