"""What compute_efficiency and model_utilization tell the user to capture or pass, keyed to
the workload (metrics/workload.py), so that a CUDA program outside PyTorch is not told about
Hugging Face configs or PyTorch's NVTX options.

- PyTorch and LLM workloads (and every PyTorch profiler trace): the PyTorch capture option
  that records operator shapes; MFU from --model config.json (LLMs) or
  --model-flops-per-token with --tokens-per-step.
- TensorRT engines, plain CUDA programs and unknown workloads: their traces carry no operator
  shapes, so per-kernel FLOPs and bytes come from Nsight Compute (ncu_plan.sh); MFU needs the
  FLOPs a step must compute, passed as --model-flops-per-token F with --tokens-per-step 1.
"""

from __future__ import annotations

from nsys_llm_explainer.compute.sources import KINETO_CAPTURE, NVTX_CAPTURE
from nsys_llm_explainer.model import TraceFormat

LLM_KINDS = frozenset({"llm_inference", "llm_training"})
PYTORCH_KINDS = LLM_KINDS | {"pytorch_training", "pytorch_inference"}


def framework(workload: str, trace_format: TraceFormat) -> bool:
    """Whether the trace comes from PyTorch (whose operators can carry shapes)."""
    return workload in PYTORCH_KINDS or trace_format is TraceFormat.KINETO


def _not_framework(workload: str) -> str:
    if workload == "tensorrt_inference":
        return "a TensorRT engine's trace carries no operator shapes"
    return "a CUDA program outside PyTorch records no operator shapes in its trace"


def shapes_missing(reason: str, workload: str, trace_format: TraceFormat) -> str:
    """Why operator FLOPs and bytes are missing (`reason`, from compute_sources), with what
    to do about it for this workload."""
    if trace_format is TraceFormat.KINETO:
        return f"{reason}: {KINETO_CAPTURE}"
    if framework(workload, trace_format):
        return f"{reason}: {NVTX_CAPTURE}"
    return (
        f"{reason}; {_not_framework(workload)}: Nsight Compute measures each kernel's FLOPs and "
        "bytes (ncu_plan.sh lists the kernels worth it)"
    )


def model_inputs(workload: str, trace_format: TraceFormat) -> str:
    """The options that give model FLOPs (MFU) for this workload."""
    if workload in LLM_KINDS:
        return (
            "pass --model CONFIG.json (a Hugging Face config.json) or --model-flops-per-token N "
            "(with --tokens-per-step N when shapes are not recorded)"
        )
    if framework(workload, trace_format):
        return (
            "pass --model-flops-per-token N with --tokens-per-step N (FLOPs per token or sample, "
            "and tokens or samples per step; --model CONFIG.json describes decoder-only "
            "transformers)"
        )
    return (
        "pass the FLOPs one step must compute as --model-flops-per-token F with "
        "--tokens-per-step 1"
    )


def hfu_missing(workload: str, trace_format: TraceFormat) -> str:
    """Why HFU (measured operator FLOPs) is missing, for this workload."""
    if framework(workload, trace_format):
        return (
            "HFU: operator shapes were not recorded (PyTorch profiler: record_shapes=True; Nsight "
            "Systems: --pytorch=autograd-shapes-nvtx)"
        )
    return f"HFU: {_not_framework(workload)}"
