"""Precision advice for float32 matrix math, keyed by the GPU architecture the trace shows
(docs/diagnosis.md, "Advice that fits the hardware"):

- Volta and Turing have no TF32 or BF16 tensor cores: FP16 autocast, with a gradient scaler in
  training;
- Ampere and Ada: TF32 for float32 matrix products, or BF16;
- Hopper adds FP8 (Transformer Engine); Ada has FP8 tensor cores too;
- Blackwell adds the block-scaled MXFP8 and NVFP4 formats;
- AMD CDNA GPUs: BF16 (their FP32 matrix rate is a fraction of the BF16 rate);
- unknown architecture: what each generation allows, said as such.

Where the architecture is only a lower bound (kernel names built for sm_80 run on Ampere and
newer), the advice is that of the lower bound, and the newer formats are offered as "on
Hopper or newer".
"""

from __future__ import annotations

PRE_AMPERE = ("volta", "turing")
GROUPS = {"volta": "fp16_only", "turing": "fp16_only", "ampere": "ampere", "ada": "ada", "hopper": "hopper",
          "blackwell": "blackwell", "cdna2": "amd", "cdna3": "amd", "cdna4": "amd"}

_TF32_PT = ("Let float32 matrix products use TF32 tensor cores: `torch.set_float32_matmul_precision('high')` "
            "(or `torch.backends.cuda.matmul.allow_tf32 = True`).")
_TF32_CONV = ("; convolutions use TF32 while `torch.backends.cudnn.allow_tf32` stays True (the default).")
_BF16_PT = ("Better: run the model in BF16 (`torch.autocast('cuda', dtype=torch.bfloat16)`, or cast the weights), "
            "which also halves the bytes moved.")
_FP16_PT = ("This GPU has no TF32 or BF16 tensor cores: run the matrix math in FP16 with "
            "`torch.autocast('cuda', dtype=torch.float16)` and, when training, scale the loss with "
            "`torch.amp.GradScaler('cuda')`.")
_FP16_CONV = "; `model.to(memory_format=torch.channels_last)` lets cuDNN pick FP16 tensor-core convolutions."
_FP8 = ("For the largest GEMMs, FP8 doubles the tensor-core peak again: Transformer Engine "
        "(`te.Linear` under `te.fp8_autocast()`), or FP8 weights and activations in the serving engine.")
_MX = ("Blackwell adds block-scaled MXFP8 and NVFP4: Transformer Engine's `MXFP8BlockScaling` and "
       "`NVFP4BlockScaling` recipes for training, NVFP4 or MXFP8 checkpoints (TensorRT Model Optimizer) "
       "for inference.")
_TF32_C = ("Enable TF32 tensor-core math for float32 GEMMs (`cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH)` "
           "or `CUBLAS_COMPUTE_32F_FAST_TF32` in `cublasGemmEx`), or store the operands in BF16/FP16.")
_FP16_C = ("This GPU has no TF32 or BF16 tensor cores: store the operands in FP16 and call `cublasGemmEx` with "
           "`CUDA_R_16F` inputs and `CUBLAS_COMPUTE_32F` (FP16 tensor cores, FP32 accumulation).")
_AMD_PT = ("Run the model in BF16 (`torch.autocast('cuda', dtype=torch.bfloat16)`): on AMD Instinct GPUs "
           "float32 matrix math runs at a fraction of the BF16 matrix-core rate (MI300X: 163 vs 1,307 TFLOPS).")
_AMD_C = ("Store the operands in BF16 and call hipBLASLt (or `hipblasGemmEx`) with `HIP_R_16BF` inputs and "
          "`HIPBLAS_COMPUTE_32F`.")


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


def _with_conv(line: str, conv_words: str, conv: bool) -> str:
    """`line` with its convolution clause (cuDNN's settings) only when convolutions ran."""
    return line[:-1] + conv_words if conv else line


def fp32_matmul(family: str | None, exact: bool, pytorch: bool, amd: bool = False,
                conv: bool = False) -> tuple[str, ...]:
    """Advice lines, main fix first, for float32 GEMMs and convolutions without tensor cores on
    a GPU of `family` (None: unknown; `exact` False: a lower bound from kernel names; `amd`: an
    AMD GPU whose family may be unknown). cuDNN's settings (`cudnn.allow_tf32`,
    `channels_last`) are named only when convolutions ran (`conv`)."""
    group = "amd" if amd else GROUPS.get(family or "")
    if group == "amd":
        return (_AMD_PT if pytorch else _AMD_C,)
    fp16 = _with_conv(_FP16_PT, _FP16_CONV, conv) if pytorch else _FP16_C
    no_tf32 = fp16.replace("This GPU has no TF32 or BF16 tensor cores: ", "")
    if group == "fp16_only" and exact:
        return (fp16,)
    lines = [_with_conv(_TF32_PT, _TF32_CONV, conv), _BF16_PT] if pytorch else [_TF32_C]
    if group is None:
        lines[0] = "If this GPU is Ampere or newer: " + _lower(lines[0])
        lines.append("On Volta or Turing, which have neither TF32 nor BF16: " + no_tf32)
    elif group == "fp16_only":  # kernels built for Volta or Turing: that GPU, or a newer one
        lines = ["If this GPU is Volta or Turing (no TF32 or BF16 tensor cores): " + no_tf32,
                 "On Ampere or newer: " + _lower(lines[0]), *lines[1:]]
    elif group == "blackwell":
        lines += [_FP8, _MX]
    elif exact and group in ("ada", "hopper"):
        lines.append(_FP8)
    elif not exact:
        lines.append("On Ada, Hopper or newer (the kernel names show only the oldest architecture this GPU "
                     "can be): " + _lower(_FP8))
    return tuple(lines)
