"""The element type a GEMM or attention kernel computes in, read from its name, for callers
that must supply a dtype to shapes from NVTX names (which carry none).

Only names that state the type are read: cuBLAS/cuDNN xmma names list the A/B/C types
("sm90_xmma_gemm_bf16bf16_bf16f32_f32_..." is BF16 in, FP32 accumulate), older cuBLAS names
say "s16816gemm_bf16" or "h1688gemm", template arguments say "cutlass::bfloat16_t" or
"c10::Half". cuBLAS nvjet names start with a type code per operand ("nvjet_hsh_..." half,
"nvjet_tst_..." bfloat16, "nvjet_qqtst_..." FP8 inputs); that reading is marked weaker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULES = (
    # (pattern, dtype, peak class, evidence strength)
    (r"e4m3|e5m2|fp8|qgmma|float8", "fp8_e4m3", "fp8"),
    (r"bf16|bfloat16", "bf16", "bf16"),
    (r"tf32", "fp32", "tf32"),
    (
        r"(?<![a-z])(?:f16f16|fp16|h884|h1688|h16816|hgemm)|c10::half|cutlass::half_t|__half",
        "fp16",
        "fp16",
    ),
    (r"i8i8|imma|int8|s8s8", "int8", "int8"),
    (r"dgemm|f64f64|(?<![a-z])double", "fp64", "fp64"),
    (r"sgemm|f32f32_f32f32|ffma", "fp32", "fp32"),
)
_NVJET = re.compile(r"(?<![a-z])nvjet_(?:sm\d+_)?([a-z]{3,5})_", re.IGNORECASE)
_NVJET_CODES = {
    "h": ("fp16", "fp16"),
    "t": ("bf16", "bf16"),
    "q": ("fp8_e4m3", "fp8"),
    "e": ("fp8_e5m2", "fp8"),
    "s": ("fp32", "fp32"),
    "d": ("fp64", "fp64"),
}


@dataclass(frozen=True)
class KernelDtype:
    dtype: str  # storage dtype of the inputs (canonical)
    compute_class: str  # peak-table class ("tf32" for a TF32 kernel on fp32 data)
    evidence: str  # what in the name said so


def dtype_from_kernel(name: str) -> KernelDtype | None:
    """The input dtype a kernel name states, or None when it states none."""
    low = name.lower()
    for pattern, dtype, cls in _RULES:
        m = re.search(pattern, low)
        if m:
            return KernelDtype(dtype, cls, f"kernel name contains {m.group(0)!r}")
    m = _NVJET.search(low)
    if m and m.group(1)[0] in _NVJET_CODES:
        dtype, cls = _NVJET_CODES[m.group(1)[0]]
        return KernelDtype(dtype, cls, f"nvjet type code {m.group(1)!r} (first operand)")
    return None
