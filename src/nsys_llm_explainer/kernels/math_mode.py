"""The math mode of a GEMM or convolution kernel, read from its name: the operand data type
and whether it runs on tensor cores, each with the name token that decided it.

Only what the name states is reported; None means the name does not say (Hopper/Blackwell
cuBLAS `nvjet_*` kernels, most hand-written kernels). The name read is the function name
with its namespaces (for `cutlass::Kernel<Op>` and other generic launchers, the operator),
split into `_`-separated tokens.

Data type: the first token, left to right, of kinds 1-3; else 4; else 5.
1. an xmma/CUTLASS 3 operand pair or list: `sm80_xmma_gemm_bf16bf16_...` (A and B are
   bf16), `cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_...`;
2. a data type token: `bf16`, `fp16`/`f16`/`half`, `tf32`, `fp8`/`e4m3`/`e5m2`,
   `int8`/`s8`/`i8`, `fp64`/`f64`, `fp32`/`f32`, first in the name
   (`ampere_bf16_s16816gemm_bf16_...`, `cutlass_3x_gemm_fp8`);
3. the instruction core `<accumulator letter><instruction shape>gemm` of cuBLAS and CUTLASS
   tensor-core kernels (the letter is the accumulator type: s f32, h f16, d f64, i s32):
   `h884`/`h1688`/`h16816` fp16, `s884` fp16 (Volta HMMA takes only fp16), `s1688` on
   Ampere and later tf32 (fp32 operands on tensor cores: CUTLASS converts them to TF32;
   on Turing, `turing_*`/`_75_`, fp16), `s16816` 16-bit (fp16 unless bf16 is named),
   `i8816`/`i16832` int8, `d884`/`d1688` fp64; `imma` int8, `hmma` fp16, `dmma` fp64;
4. the BLAS precision letter of a classic kernel: `sgemm`/`sgemv`/`scudnn` fp32,
   `dgemm` fp64, `hgemm`/`hcudnn` fp16, `igemm` int8 (`cgemm`, `zgemm` and `gcgemm` are
   complex: None);
5. cuBLAS gemv kernels (`gemv2T_kernel_val<int, int, float, ...>`): the first floating
   type among the template arguments.

Tensor cores
- True: `tensorop`, `wmma`, `hmma`/`imma`/`dmma`/`wgmma`, `tensorMxNxK`, `warpgroupsize`
  (a Hopper warpgroup MMA), an instruction core (`s1688gemm`, `h884cudnn`), or a tf32/fp8
  data type (tensor-core-only formats);
- False: `simt`, `ffma`/`hfma`/`dfma` (scalar FMA), a classic BLAS letter kernel (`sgemm`,
  `dgemm`, `hgemm`, `scudnn`) or a gemv, with no token above;
- else None.
With fp32 operands on tensor cores the math is TF32, so such a kernel reports tf32.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from nsys_llm_explainer.kernels.demangled import parse
from nsys_llm_explainer.kernels.subject import functor

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp64")

_TOKEN_DTYPE = {
    "bf16": "bf16", "fp16": "fp16", "f16": "fp16", "half": "fp16", "tf32": "tf32",
    "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "int8": "int8", "s8": "int8", "i8": "int8",
    "u8": "int8", "fp64": "fp64", "f64": "fp64", "fp32": "fp32", "f32": "fp32",
}
_TYPE = "bf16|tf32|f16|f32|f64|e4m3|e5m2|s8|i8|u8"
_PAIR = re.compile(rf"^({_TYPE})({_TYPE})$")
_CORE = re.compile(r"^(g?)([shdic])(\d{3,6})(tf32|bf16|f16)?(gemm|cudnn)")
_CLASSIC = re.compile(r"^([sdhicz]|gc)(gemm|gemv|cudnn)")
_TENSOR = re.compile(r"^(tensor\d+x\d+x\d+|tensorop|wmma|hmma|imma|dmma|wgmma|warpgroupsize)")
_SIMT_WORDS = ("simt", "ffma", "hfma", "dfma")
_GEMV = re.compile(r"gemv", re.IGNORECASE)
_FLOAT_TYPES = {
    "float": "fp32", "double": "fp64", "__half": "fp16", "half": "fp16", "c10::Half": "fp16",
    "__nv_bfloat16": "bf16", "c10::BFloat16": "bf16", "int8_t": "int8", "signed char": "int8",
}


@dataclass(frozen=True)
class MathMode:
    dtype: str | None  # one of DTYPES, or None when the name does not say
    tensor_cores: bool | None  # None when the name does not say
    dtype_token: str | None = None  # the token that decided dtype
    tensor_core_token: str | None = None  # the token that decided tensor_cores


def _text(name: str) -> str:
    """The part of the name that carries the conventions: a generic launcher's operator
    (cutlass::Kernel2<cutlass_80_simt_sgemm_...>) or the function name with namespaces."""
    p = parse(name)
    f = functor(p)
    return f if f else p.qualified()


def _core_dtype(letter: str, shape: str, named: str | None, text: str) -> str | None:
    if named:
        return _TOKEN_DTYPE[named]
    if letter == "h":
        return "fp16"
    if letter == "i":
        return "int8"
    if letter == "d":
        return "fp64"
    if letter == "s":
        if shape == "884":
            return "fp16"
        if shape == "1688":
            turing = re.search(r"turing|(^|_)75(_|$)|sm_?75", text, re.IGNORECASE)
            return "fp16" if turing else "tf32"
        if shape.startswith("168"):
            return "fp16"
    return None


def _gemv_dtype(name: str) -> tuple[str, str] | None:
    for arg in parse(name).template_args:
        arg = arg.strip().removeprefix("const ").strip()
        if arg in _FLOAT_TYPES:
            return _FLOAT_TYPES[arg], arg
    return None


@lru_cache(maxsize=65536)
def math_mode(name: str) -> MathMode:
    """Operand data type and tensor-core use of a GEMM/conv kernel name (module doc)."""
    text = _text(name)
    tokens = [t for t in re.split(r"[_:\W]+", text.lower()) if t]
    dtype = dtype_token = None
    tensor: bool | None = None
    tensor_token = None
    classic = None
    for t in tokens:
        pair = _PAIR.match(t)
        if dtype is None and pair:
            dtype, dtype_token = _TOKEN_DTYPE[pair.group(1)], t
        elif dtype is None and t in _TOKEN_DTYPE:
            dtype, dtype_token = _TOKEN_DTYPE[t], t
        core = _CORE.match(t)
        if core and not core.group(1):
            if tensor is not True:
                tensor, tensor_token = True, t
            core_dtype = _core_dtype(core.group(2), core.group(3), core.group(4), text)
            if dtype is None and core_dtype:
                dtype, dtype_token = core_dtype, t
        elif classic is None and _CLASSIC.match(t):
            classic = t
        if tensor is not True and _TENSOR.match(t):
            tensor, tensor_token = True, t
            mma = {"imma": "int8", "hmma": "fp16", "dmma": "fp64"}.get(t)
            if dtype is None and mma:
                dtype, dtype_token = mma, t
        elif tensor is None and t in _SIMT_WORDS:
            tensor, tensor_token = False, t
    if classic is not None:
        letter = _CLASSIC.match(classic).group(1)  # type: ignore[union-attr]
        if dtype is None:
            found = {"s": "fp32", "d": "fp64", "h": "fp16", "i": "int8"}.get(letter)
            if found:
                dtype, dtype_token = found, classic
        if tensor is None:
            tensor, tensor_token = False, classic
    if _GEMV.search(text) and dtype is None:
        found_gemv = _gemv_dtype(name)
        if found_gemv:
            dtype, dtype_token = found_gemv
        if tensor is None:
            tensor, tensor_token = False, "gemv"
    if dtype in ("tf32", "fp8") and tensor is None:
        tensor, tensor_token = True, dtype_token
    if dtype == "fp32" and tensor is True:
        dtype = "tf32"  # fp32 operands on tensor cores are multiplied as TF32
    return MathMode(dtype, tensor, dtype_token, tensor_token)
