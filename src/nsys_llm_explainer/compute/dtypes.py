"""Element types: names as PyTorch records them, their sizes, and the peak they compute at.

Canonical names are short and lower-case ("bf16", "fp8_e4m3", "int64"). Three spellings
reach us: Kineto's "Input type" (the C++ type name of the tensor's dtype, e.g.
"c10::BFloat16", "float", "long int"), ScalarType codes in "Concrete Inputs" (the dtype
argument of aten::to / _to_copy / _scaled_mm, e.g. "15" for bfloat16), and names a user or
caller passes ("bfloat16", "torch.float16", "fp8").

The element type a GEMM or attention kernel computes in, read from its name, for callers
that must supply a dtype to shapes from NVTX names (which carry none).

Only names that state the type are read: cuBLAS/cuDNN xmma names list the A/B/C types
("sm90_xmma_gemm_bf16bf16_bf16f32_f32_..." is BF16 in, FP32 accumulate), older cuBLAS names
say "s16816gemm_bf16" or "h1688gemm", template arguments say "cutlass::bfloat16_t" or
"c10::Half". cuBLAS nvjet names start with a type code per operand ("nvjet_hsh_..." half,
"nvjet_tst_..." bfloat16, "nvjet_qqtst_..." FP8 inputs); that reading is marked weaker."""

from __future__ import annotations

import re

from nsys_llm_explainer.frozen import frozen

# bytes per element; fp4x2 packs two 4-bit values in one byte (one element of the tensor)
SIZES: dict[str, int] = {
    "fp64": 8,
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_e8m0": 1,
    "fp4x2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint64": 8,
    "uint32": 4,
    "uint16": 2,
    "uint8": 1,
    "bool": 1,
    "complex128": 16,
    "complex64": 8,
    "complex32": 4,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
    "quint4x2": 1,
    "quint2x4": 1,
}

# Kineto "Input type" strings (c10 TypeMeta names) -> canonical name.
_KINETO = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8_e4m3",
    "c10::Float8_e4m3fnuz": "fp8_e4m3",
    "c10::Float8_e5m2": "fp8_e5m2",
    "c10::Float8_e5m2fnuz": "fp8_e5m2",
    "c10::Float8_e8m0fnu": "fp8_e8m0",
    "c10::Float4_e2m1fn_x2": "fp4x2",
    "long int": "int64",
    "long": "int64",
    "int64_t": "int64",
    "int": "int32",
    "short int": "int16",
    "short": "int16",
    "signed char": "int8",
    "unsigned char": "uint8",
    "unsigned short": "uint16",
    "short unsigned int": "uint16",
    "unsigned int": "uint32",
    "unsigned long": "uint64",
    "long unsigned int": "uint64",
    "bool": "bool",
    "c10::complex<double>": "complex128",
    "c10::complex<float>": "complex64",
    "c10::complex<c10::Half>": "complex32",
    "c10::qint8": "qint8",
    "c10::quint8": "quint8",
    "c10::qint32": "qint32",
    "c10::quint4x2": "quint4x2",
    "c10::quint2x4": "quint2x4",
}

# Argument kinds Kineto records for non-tensor inputs ("" is None or an undefined tensor).
NON_TENSOR_TYPES = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "Device"})

# c10::ScalarType codes as printed in Concrete Inputs (ScalarType.h order).
_SCALAR_TYPE = {
    0: "uint8",
    1: "int8",
    2: "int16",
    3: "int32",
    4: "int64",
    5: "fp16",
    6: "fp32",
    7: "fp64",
    8: "complex32",
    9: "complex64",
    10: "complex128",
    11: "bool",
    12: "qint8",
    13: "quint8",
    14: "qint32",
    15: "bf16",
    16: "quint4x2",
    17: "quint2x4",
    23: "fp8_e5m2",
    24: "fp8_e4m3",
    25: "fp8_e5m2",
    26: "fp8_e4m3",
    27: "uint16",
    28: "uint32",
    29: "uint64",
}

# Names callers and users write -> canonical.
_ALIASES = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "tf32": "fp32",  # storage is fp32; the compute class is chosen separately
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3fnuz": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "float8_e5m2": "fp8_e5m2",
    "float8_e5m2fnuz": "fp8_e5m2",
    "int": "int32",
    "long": "int64",
    "uint8": "uint8",
}

# Storage dtype -> the dtype class of the peak table (gpu_specs.DTYPE_CLASSES).
_PEAK_CLASS = {
    "fp64": "fp64",
    "fp32": "fp32",
    "fp16": "fp16",
    "bf16": "bf16",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "int8": "int8",
    "uint8": "int8",
}


def from_kineto(type_name: object) -> str | None:
    """Canonical dtype of a Kineto "Input type" entry, or None (not a tensor, or unknown)."""
    if not isinstance(type_name, str):
        return None
    return _KINETO.get(type_name.strip())


def from_scalar_type(code: object) -> str | None:
    """Canonical dtype of a ScalarType code as Concrete Inputs print it ("15"), or None."""
    try:
        return _SCALAR_TYPE.get(int(str(code).strip()))
    except ValueError:
        return None


def normalize(name: str) -> str:
    """Canonical dtype for a name a caller or user writes; ValueError if unknown."""
    key = name.strip().lower().removeprefix("torch.")
    if key in SIZES:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    known = _KINETO.get(name.strip())
    if known:
        return known
    raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(sorted(SIZES))}")


def size(dtype: str) -> int:
    """Bytes per element of a canonical dtype."""
    return SIZES[dtype]


def peak_class(dtype: str) -> str | None:
    """The peak-table class a GEMM on this storage dtype runs at by default (fp32 -> "fp32")."""
    return _PEAK_CLASS.get(dtype)


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


@frozen
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
