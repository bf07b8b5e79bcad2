"""How close to the hardware: FLOPs and bytes per operator, peaks, roofline, MFU/MBU and an
Nsight Compute plan. Self-contained building blocks with no dependency on trace loading;
docs/compute.md documents every formula and convention.

- dtypes, shapes, nvtx_shapes: operator inputs from Kineto args or PyTorch NVTX range names.
- cost, gemm, conv, attention, memory_ops, movement, opcost: FLOPs (2 x MACs) and
  compulsory bytes.
- peaks, arch, kernel_dtype: which peak figures apply (gpu_specs table, --gpu-peaks file,
  or an assumed representative GPU of the architecture the kernel names require).
- roofline: ridge points, attainable FLOP/s, bound, efficiency, plausibility check.
- model_config, model_flops: parameters, FLOPs per token, decode bytes, MFU and MBU.
- ncu_plan: ncu_plan.sh and ncu_targets.json for the top kernels.
"""
