"""The math mode of a GEMM or convolution kernel, read from its name: the operand data type
(what the tensor cores multiply), the accumulator and output types where the name states
them, block scaling, and whether it runs on tensor cores (AMD: matrix cores), each with the
name token that decided it.

An operand type is never read from the accumulator: `bmm_E4m3_E4m3E4m3_Fp32` multiplies FP8
and accumulates in FP32, `sm90_xmma_gemm_bf16bf16_bf16f32_f32` multiplies BF16. Only what
the name states is reported; None means the name does not say (most hand-written kernels).
The name read is the function name with its namespaces (for `cutlass::Kernel<Op>` and other
generic launchers, the operator), split into `_`-separated tokens.

Conventions read, in this order (the first that applies decides the operand type):
1. TensorRT-LLM generated kernels (trtllm-gen, FlashInfer): `{gemm|bmm}_{output}_{A}{B}_
   {accumulator}_t...`: `bmm_Bfloat16_E4m3E4m3_Fp32_t128x8x128...` (FP8 operands),
   `bmm_MxE4m3_MxE2m1MxE4m3_Fp32` (MXFP4 weights x MXFP8 activations), `bmm_E2m1_E2m1E2m1_Fp32`
   (FP4 operands: NVFP4 with its per-16 E4M3 scales);
2. cuBLAS nvjet (Hopper, Blackwell): `nvjet_[sm100_]{code}_...`, one letter per type: three
   letters are operand, compute, output (`tst` BF16 in, FP32 compute, BF16 out); five are A, B,
   C, compute, D (`qqtst` E4M3 operands; `ootst` FP4 operands, with `Avec16UE4M3` NVFP4 and
   `Avec32UE8M0` MX block scales named at the end);
3. AMD Tensile/hipBLASLt: `Cijk_A.._B.._{Ti}{To}{Tc}_BH...` (HPA: `BBS` BF16 in and out, FP32
   compute; `HHS`, `HSS`, `F8..`, `I8II`) or `{T}B` (`SB`, `HB`: one type, batched); an `MI32x32x8`
   instruction token means matrix cores (MFMA);
4. CUTLASS 3 (`cutlass3x_sm90_tensorop_..gemm_bf16_bf16_f32_bf16_bf16_...`): A, B, accumulator,
   C, D after the gemm token; block-scaled types are `{scale}x{data}`: `ue8m0xe2m1` MXFP4,
   `ue8m0xe4m3` MXFP8, `ue4m3xe2m1`/`ue4m3xf4` NVFP4;
5. xmma (cuBLAS/cuDNN): an operand pair, then output and accumulator:
   `sm80_xmma_gemm_bf16bf16_bf16f32_f32_...` (A and B BF16, C BF16, FP32 accumulation);
6. a data type token, first in the name (`ampere_bf16_s16816gemm_bf16_...`, `cutlass_3x_gemm_fp8`);
7. the instruction core `<accumulator letter><instruction shape>gemm` of cuBLAS and CUTLASS
   tensor-core kernels (the letter is the accumulator: s f32, h f16, d f64, i s32):
   `h884`/`h1688`/`h16816` fp16, `s884` fp16 (Volta HMMA takes only fp16), `s1688` on Ampere
   and later tf32 (fp32 operands on tensor cores: CUTLASS converts them to TF32; on Turing,
   `turing_*`/`_75_`, fp16), `s16816` 16-bit (fp16 unless bf16 is named), `i8816`/`i16832`
   int8, `d884`/`d1688` fp64; `imma` int8, `hmma` fp16, `dmma` fp64;
8. the BLAS precision letter of a classic kernel: `sgemm`/`sgemv`/`scudnn` fp32, `dgemm` fp64,
   `hgemm`/`hcudnn` fp16, `igemm` int8 (`cgemm`, `zgemm` and `gcgemm` are complex: None);
9. the first element type among the template arguments (`gemv2T_kernel_val<int, int, float, ...>`,
   `ck::kernel_gemm_xdl_cshuffle_v3<..., ck::bhalf_t, ...>`, `cutlass::bfloat16_t`); for cuDNN's
   own templated convolution kernels (`cudnn::detail::wgrad_alg0_engine<float, ...>`,
   `dgrad_engine`, `winogradForwardData4x4`, `conv2d_grouped_direct_kernel`) too, which run
   on the CUDA cores (cuDNN's tensor-core kernels are named `xmma`, `h884cudnn`, ...).

Tensor cores
- True: `tensorop`/`bstensorop`, `wmma`, `hmma`/`imma`/`dmma`/`wgmma`, `tensorMxNxK`,
  `warpgroupsize` (a Hopper warpgroup MMA), an instruction core (`s1688gemm`, `h884cudnn`), a
  Tensile `MI..` token, CK `xdl`/`wmma`, an nvjet kernel of a 16-bit or narrower type, or a
  tensor-core-only format (tf32, fp8, fp6, fp4);
- False: `simt`, `ffma`/`hfma`/`dfma` (scalar FMA), a classic BLAS letter kernel (`sgemm`,
  `dgemm`, `hgemm`, `scudnn`), a gemv or a templated cuDNN convolution kernel, with no token
  above;
- else None.
With fp32 operands on NVIDIA tensor cores the math is TF32, so such a kernel reports tf32.
"""

from __future__ import annotations

import re
from functools import lru_cache

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.demangled import functor, parse

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8", "int4", "fp64")
# Operand types that only tensor cores multiply.
TENSOR_ONLY = frozenset({"tf32", "fp8", "fp6", "fp4"})
SCALINGS = ("mx", "nv")  # MX: E8M0 scale per 32 elements; NV: E4M3 scale per 16 (NVFP4)
WIDTH = {"fp64": 64, "fp32": 32, "tf32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "fp6": 6,
         "fp4": 4, "int4": 4, "int32": 32}

_TOKEN_DTYPE = {
    "bf16": "bf16", "fp16": "fp16", "f16": "fp16", "half": "fp16", "tf32": "tf32",
    "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "int8": "int8", "s8": "int8", "i8": "int8",
    "u8": "int8", "fp64": "fp64", "f64": "fp64", "fp32": "fp32", "f32": "fp32",
    "fp4": "fp4", "nvfp4": "fp4", "mxfp4": "fp4", "mxfp8": "fp8", "e2m1": "fp4", "fp6": "fp6",
}
_TYPE = "bf16|tf32|f16|f32|f64|e4m3|e5m2|e2m1|s8|i8|u8|s32"
_PAIR = re.compile(rf"^({_TYPE})({_TYPE})$")
_CORE = re.compile(r"^(g?)([shdic])(\d{3,6})(tf32|bf16|f16)?(gemm|cudnn)")
_CLASSIC = re.compile(r"^([sdhicz]|gc)(gemm|gemv|cudnn)")
_TENSOR = re.compile(r"^(tensor\d+x\d+x\d+|(bs)?tensorop|wmma|hmma|imma|dmma|wgmma|warpgroupsize)")
_SIMT_WORDS = ("simt", "ffma", "hfma", "dfma")
_GEMV = re.compile(r"gemv", re.IGNORECASE)
# cuDNN's own templated convolution kernels (wgrad_alg0_engine<float, ...>, dgrad_engine,
# winograd, FFT-tile and direct kernels): SIMT code whose first element type is the data type.
# cuDNN's tensor-core kernels carry other names (xmma, h884cudnn, s1688cudnn).
_CUDNN_TEMPLATED = re.compile(
    r"^cudnn::(?:detail|cnn|winograd\w*|ops)::\w*(?:grad|fprop|conv|winograd|implicit|explicit|fft)\w*$",
    re.IGNORECASE)
_ACC_LETTER = {"s": "fp32", "h": "fp16", "d": "fp64", "i": "int32"}
# Element types in template arguments (first one wins).
_FLOAT_TYPES = {
    "float": "fp32", "double": "fp64", "__half": "fp16", "half": "fp16", "c10::Half": "fp16",
    "__nv_bfloat16": "bf16", "c10::BFloat16": "bf16", "int8_t": "int8", "signed char": "int8",
    "cutlass::half_t": "fp16", "cutlass::bfloat16_t": "bf16", "cutlass::tfloat32_t": "tf32",
    "cutlass::float_e4m3_t": "fp8", "cutlass::float_e5m2_t": "fp8", "cutlass::float_e2m1_t": "fp4",
    "__nv_fp8_e4m3": "fp8", "__nv_fp8_e5m2": "fp8", "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8", "c10::Float8_e4m3fnuz": "fp8", "ck::half_t": "fp16",
    "ck::bhalf_t": "bf16", "ck::f8_t": "fp8", "ck::bf8_t": "fp8", "ck::pk_i4_t": "int4",
    "__hip_bfloat16": "bf16", "hip_bfloat16": "bf16",
}

# 1. trtllm-gen: {gemm|bmm}_{out}_{A}{B}_{acc}_t...
_TRTLLM = re.compile(r"^(?:gemm|bmm|batchedgemm)_([a-z0-9]+)_([a-z0-9]+)_([a-z0-9]+)_", re.IGNORECASE)
_TRTLLM_TYPE = re.compile(r"(mx)?(e2m1|e4m3|e5m2|e3m2|e2m3|bfloat16|fp16|fp32|int8|int4|uint8|mxint4)",
                          re.IGNORECASE)
_TRTLLM_DTYPE = {"e2m1": "fp4", "e4m3": "fp8", "e5m2": "fp8", "e3m2": "fp6", "e2m3": "fp6",
                 "bfloat16": "bf16", "fp16": "fp16", "fp32": "fp32", "int8": "int8", "int4": "int4",
                 "uint8": "int8", "mxint4": "int4"}
# 2. nvjet: nvjet_[smNNN_]{code}_...; the scale vectors (Avec16UE4M3) come later.
_NVJET = re.compile(r"(?<![a-z])nvjet_(?:sm\d+[a-z]?_)?([a-z]{3}|[a-z]{5})_", re.IGNORECASE)
_NVJET_TYPE = {"h": "fp16", "t": "bf16", "s": "fp32", "d": "fp64", "q": "fp8", "e": "fp8", "o": "fp4",
               "i": "int8"}
_NVJET_SCALE = re.compile(r"vec(16|32)ue(4m3|8m0)", re.IGNORECASE)
# 3. Tensile / hipBLASLt.
_TENSILE = re.compile(r"^(?:custom_)?cijk_a[a-z]+_b[a-z]+_([a-z0-9]+)(?:_([a-z0-9]+))?", re.IGNORECASE)
_TENSILE_CODES = (("4xi8", "int8"), ("f8b8", "fp8"), ("b8f8", "fp8"), ("f8n", "fp8"), ("b8n", "fp8"),
                  ("f8", "fp8"), ("b8", "fp8"), ("i8", "int8"), ("x", "tf32"), ("s", "fp32"), ("d", "fp64"),
                  ("h", "fp16"), ("b", "bf16"), ("i", "int32"), ("c", None), ("z", None))
_MFMA = re.compile(r"^mi\d+x\d+x\d+(x\d+)?$")
# 4. CUTLASS 3: the types after the gemm token.
_CUTLASS3 = re.compile(r"^cutlass3x_")
_BLOCK_SCALED = re.compile(r"^(ue8m0|ue4m3)x(e2m1|e4m3|e5m2|e3m2|e2m3|f4|f6|f8)$")
_BLOCK_DATA = {"e2m1": "fp4", "f4": "fp4", "e4m3": "fp8", "e5m2": "fp8", "f8": "fp8", "e3m2": "fp6",
               "e2m3": "fp6", "f6": "fp6"}
_CUTLASS3_TYPE = {"bf16": "bf16", "f16": "fp16", "f32": "fp32", "tf32": "tf32", "f64": "fp64",
                  "e4m3": "fp8", "e5m2": "fp8", "e2m1": "fp4", "s8": "int8", "u8": "int8", "s32": "int32",
                  "void": None}


@frozen
class MathMode:
    dtype: str | None  # operand type, one of DTYPES, or None when the name does not say
    tensor_cores: bool | None  # None when the name does not say
    dtype_token: str | None = None  # the token that decided dtype
    tensor_core_token: str | None = None  # the token that decided tensor_cores
    accumulator: str | None = None  # fp32, fp16, fp64, int32 where the name says
    output: str | None = None  # the output (D) type where the name says
    scaling: str | None = None  # "mx" or "nv" block scaling, where the name says
    operands: tuple[str, ...] = ()  # A and B where they differ (mixed-input kernels)

    @property
    def reduced_precision(self) -> bool:
        """Operands narrower than fp32 (fp16, bf16, fp8, fp6, fp4, int8, int4): tensor-core
        math already; advice to move to BF16 would not be an upgrade."""
        return self.dtype is not None and WIDTH.get(self.dtype, 32) < 32

    def describe(self) -> str:
        """"FP8 operands, FP32 accumulation" for evidence lines."""
        if self.dtype is None:
            return "operand type not in the name"
        op = "/".join(o.upper() for o in self.operands) if self.operands else self.dtype.upper()
        if self.scaling:
            op = f"{'MX' if self.scaling == 'mx' else 'NV'}{op} (block-scaled)"
        parts = [f"{op} operands"]
        if self.accumulator:
            parts.append(f"{self.accumulator.upper()} accumulation")
        return ", ".join(parts)


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


def _template_dtype(name: str, plain: bool) -> tuple[str, str] | None:
    """The first element type among the template arguments of the kernel or of its operator:
    a library's own element type (`ck::bhalf_t`, `cutlass::float_e4m3_t`, `c10::BFloat16`)
    anywhere in them, a plain one (`float`, `__nv_bfloat16`) only when `plain` (a gemv, whose
    template arguments are its types): elsewhere a plain type says nothing about the math."""
    p = parse(name)
    for comp in p.components:
        for arg in comp.template_args:
            arg = arg.strip().removeprefix("const ").strip()
            if plain and arg in _FLOAT_TYPES:
                return _FLOAT_TYPES[arg], arg
            for inner in re.findall(r"[A-Za-z_][\w:]*", arg):
                if inner in _FLOAT_TYPES and "::" in inner:
                    return _FLOAT_TYPES[inner], inner
    return None


def _widest(types: list[str]) -> str:
    """The operand the math runs at: the widest of A and B (an FP4 x FP8 MMA runs at FP8)."""
    return max(types, key=lambda t: WIDTH.get(t, 0))


def _trtllm(text: str) -> MathMode | None:
    m = _TRTLLM.match(text)
    if not m:
        return None
    out_t, ops, acc = m.groups()
    found = _TRTLLM_TYPE.findall(ops)
    if not found or "".join(a + b for a, b in found).lower() != ops.lower():
        return None
    types = [_TRTLLM_DTYPE[b.lower()] for _, b in found]
    mx = any(a for a, _ in found)
    acc_m = _TRTLLM_TYPE.fullmatch(acc)
    out_m = _TRTLLM_TYPE.fullmatch(out_t)
    dtype = _widest(types)
    scaling = "mx" if mx else ("nv" if dtype == "fp4" else None)
    return MathMode(
        dtype, True if dtype in TENSOR_ONLY or WIDTH.get(dtype, 32) <= 16 else None, ops, m.group(0).rstrip("_"),
        _TRTLLM_DTYPE[acc_m.group(2).lower()] if acc_m else None,
        _TRTLLM_DTYPE[out_m.group(2).lower()] if out_m else None,
        scaling, tuple(types) if len(set(types)) > 1 else (),
    )


def _nvjet(name: str) -> MathMode | None:
    m = _NVJET.search(name)
    if not m:
        return None
    code = m.group(1).lower()
    if any(c not in _NVJET_TYPE for c in code):
        return None
    if len(code) == 3:
        ops, acc, out = [_NVJET_TYPE[code[0]]], _NVJET_TYPE[code[1]], _NVJET_TYPE[code[2]]
    else:
        ops, acc, out = [_NVJET_TYPE[code[0]], _NVJET_TYPE[code[1]]], _NVJET_TYPE[code[3]], _NVJET_TYPE[code[4]]
    dtype = _widest(ops)
    sc = _NVJET_SCALE.search(name)
    scaling = ("nv" if sc.group(2).lower() == "4m3" else "mx") if sc else None
    tensor = True if WIDTH.get(dtype, 32) <= 16 or dtype in TENSOR_ONLY else None
    return MathMode(dtype, tensor, code, "nvjet" if tensor else None, acc, out, scaling,
                    tuple(ops) if len(set(ops)) > 1 else ())


def _tensile_types(group: str) -> list[str | None] | None:
    out: list[str | None] = []
    rest = group.lower()
    while rest:
        for code, dtype in _TENSILE_CODES:
            if rest.startswith(code):
                out.append(dtype)
                rest = rest[len(code):]
                break
        else:
            return None
    return out


def _tensile(text: str, tokens: list[str]) -> MathMode | None:
    m = _TENSILE.match(text)
    if not m:
        return None
    group, nxt = m.group(1), (m.group(2) or "").lower()
    mfma = next((t for t in tokens if _MFMA.match(t)), None)
    tensor: bool | None
    ttoken: str | None
    if mfma:
        tensor, ttoken = True, mfma
    else:  # a thread-tile kernel without a matrix instruction runs on the vector units
        tt = next((t for t in tokens if re.fullmatch(r"tt\d+", t)), None)
        tensor, ttoken = (False, tt) if tt else (None, None)
    types = _tensile_types(group)
    after = _tensile_types(nxt) if nxt and nxt != "bh" else None
    if types and after and len(types) == 2 and len(after) >= 2:  # mixed inputs: A B, then To .. Tc
        ops = [t for t in types if t]
        dtype = _widest(ops) if ops else None
        return MathMode(dtype, tensor, group, ttoken, after[-1], after[0], None,
                        tuple(ops) if len(set(ops)) > 1 else ())
    if types and len(types) >= 3:  # HPA: Ti To Tc
        return MathMode(types[0], tensor, group, ttoken, types[-1], types[-2])
    if len(group) == 2 and group[1].lower() == "b":  # {T}B: one type, batched
        one = _tensile_types(group[0])
        t = one[0] if one else None
        return MathMode(t, tensor, group, ttoken, t, t)
    return MathMode(None, tensor, None, ttoken)


def _cutlass3(tokens: list[str]) -> MathMode | None:
    if not tokens or not _CUTLASS3.match(tokens[0] + "_"):
        return None
    at = next((i for i, t in enumerate(tokens) if t.endswith("gemm")), None)
    if at is None:
        return None
    rest = [t for t in tokens[at + 1:] if t not in ("block", "scaled")]
    types: list[tuple[str | None, str | None, str]] = []  # (dtype, scaling, token)
    for t in rest:
        bs = _BLOCK_SCALED.match(t)
        if bs:
            types.append((_BLOCK_DATA[bs.group(2)], "mx" if bs.group(1) == "ue8m0" else "nv", t))
        elif t in _CUTLASS3_TYPE:
            types.append((_CUTLASS3_TYPE[t], None, t))
        else:
            break
    if len(types) < 3 or types[0][0] is None:
        return None
    a, b, acc = types[0], types[1], types[2]
    out = types[4][0] if len(types) > 4 else None
    ops = [x for x in (a[0], b[0]) if x]
    tensor = any(t.endswith("tensorop") for t in tokens[:at + 1])
    dtype = _widest(ops)
    if dtype == "fp32" and tensor:
        dtype = "tf32"
    return MathMode(dtype, True if tensor else None, a[2], next((t for t in tokens if t.endswith("tensorop")), None),
                    acc[0], out, a[1] or b[1], tuple(ops) if len(set(ops)) > 1 else ())


@lru_cache(maxsize=65536)
def math_mode(name: str) -> MathMode:
    """Operand type, accumulator, scaling and tensor-core use of a GEMM/conv kernel name
    (module doc)."""
    text = _text(name)
    tokens = [t for t in re.split(r"[_:\W]+", text.lower()) if t]
    for special in (_trtllm(text), _nvjet(text), _tensile(text, tokens), _cutlass3(tokens)):
        if special is not None and (special.dtype is not None or special.tensor_cores is not None):
            return special
    dtype = dtype_token = accumulator = output = None
    tensor: bool | None = None
    tensor_token = None
    classic = None
    pairs = 0
    for t in tokens:
        pair = _PAIR.match(t)
        if pair:
            pairs += 1
            if dtype is None:
                dtype, dtype_token = _TOKEN_DTYPE.get(pair.group(1)), t
            elif pairs == 2 and accumulator is None:  # xmma: output type, accumulator type
                output, accumulator = _TOKEN_DTYPE.get(pair.group(1)), _TOKEN_DTYPE.get(pair.group(2))
                if pair.group(2) == "s32":
                    accumulator = "int32"
        elif dtype is None and t in _TOKEN_DTYPE:
            dtype, dtype_token = _TOKEN_DTYPE[t], t
        core = _CORE.match(t)
        if core and not core.group(1):
            if tensor is not True:
                tensor, tensor_token = True, t
            accumulator = accumulator or _ACC_LETTER.get(core.group(2))
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
        elif tensor is not True and t in ("xdl", "xdlops", "mfma"):
            tensor, tensor_token = True, t
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
    cudnn_simt = bool(_CUDNN_TEMPLATED.match(text))
    if dtype is None:
        found_t = _template_dtype(name, plain=bool(_GEMV.search(text)) or cudnn_simt)
        if found_t:
            dtype, dtype_token = found_t
            if cudnn_simt and tensor is None:
                tensor, tensor_token = False, text.rsplit("::", 1)[-1].lower()
    if _GEMV.search(text) and tensor is None:
        tensor, tensor_token = False, "gemv"
    if dtype in TENSOR_ONLY and tensor is None:
        tensor, tensor_token = True, dtype_token
    if dtype == "fp32" and tensor is True:
        dtype = "tf32"  # fp32 operands on tensor cores are multiplied as TF32
    return MathMode(dtype, tensor, dtype_token, tensor_token, accumulator, output)
