"""How close to the hardware: FLOPs and bytes per operator, peaks, roofline, MFU/MBU and an
Nsight Compute plan. Self-contained building blocks with no dependency on trace loading;
docs/compute.md documents every formula and convention.

- dtypes, shapes: operator inputs from Kineto args or PyTorch NVTX range names, and the
  element type a kernel's name states.
- cost, gemm, conv, attention, memory_ops, opcost: FLOPs (2 x MACs) and compulsory bytes.
- sources, count: operator calls with their shapes and cost, from whichever source a trace
  has, and what to capture when there is none; which calls are counted.
- peaks, arch: the peak table, which peaks apply (gpu_specs.json, --gpu-peaks file, or an
  assumed representative GPU of the architecture the kernel names require), per-device
  peaks and the roofline (ridge points, attainable FLOP/s, bound, plausibility check).
- efficiency: compute_efficiency's tables and roofline.
- model_flops, model_report: model parameters, FLOPs per token, decode bytes,
  MFU and MBU per step and phase, and their plausibility checks.
- ncu_plan: ncu_plan.sh and ncu_targets.json for the top kernels.
"""
