"""What a kernel name is judged by: its function name, not its template arguments or
parameters (kernels/demangled.py parses the name).

`subjects(name)` gives, in the order they are tried:
1. for a generic launcher (below), the functor or lambda it runs;
2. the function's own name (for `f(...)::[lambda]::operator()`, `f`);
3. the enclosing namespaces and classes (`deep_ep::intranode` of `deep_ep::intranode::dispatch`),
   only consulted when neither of the above says anything.

Generic launchers are kernels whose function name says nothing about the work: PyTorch's
TensorIterator launchers (`vectorized_elementwise_kernel<4, FillFunctor<float>, ...>`,
`reduce_kernel<512, 1, ReduceOp<float, MeanOps<...>>>`, ...), CUTLASS's
`cutlass::Kernel<Op>` / `Kernel2<Op>` / `device_kernel<Op>` and composable kernel's
`ck_tile::kentry<256, 1, FmhaFwdKernel<...>>`. Their functor is the first
template argument that names a function, functor or lambda: values (`4`, `(int)4`) and
plain types (`float`, `c10::Half`, `std::array<...>`, offset calculators) are skipped, and
wrappers that only forward another functor (`gpu_kernel_impl_nocast<F>`,
`BinaryFunctor<float, float, float, MulFunctor<float>>`, `ReduceOp<float, MeanOps<...>>`,
`func_wrapper_t<...>`, `enable_sm90_or_later<F>`) are looked through. A lambda stands for
the function that defines it (`direct_copy_kernel_cuda(...)::[lambda]...` is
`direct_copy_kernel_cuda`). The functor is given with its namespaces, template arguments
left out (`vllm::cutlass_3x_gemm_fp8::GemmKernel`).
"""

from __future__ import annotations

import re
from functools import lru_cache

from nsys_llm_explainer.kernels.demangled import ParsedName, parse

GENERIC_LAUNCHERS = re.compile(
    r"^(elementwise_kernel|vectorized_elementwise_kernel|unrolled_elementwise_kernel|"
    r"vectorized_templated_elementwise_kernel|index_elementwise_kernel|"
    r"elementwise_kernel_with_index|distribution_elementwise_grid_stride_kernel|"
    r"distribution_nullary_kernel|reduce_kernel|multi_tensor_apply_kernel|"
    r"_scatter_gather_elementwise_kernel|gpu_kernel_with_index)$"
)
CUTLASS_LAUNCHERS = re.compile(r"^(Kernel|Kernel2|device_kernel)$")
WRAPPERS = re.compile(
    r"^(gpu_kernel_impl|gpu_kernel_impl_nocast|gpu_kernel|gpu_index_kernel|launch_kernel|"
    r"BinaryFunctor|AUnaryFunctor|BUnaryFunctor|ReduceOp|func_wrapper_t|"
    r"enable_sm\w*|launch_vectorized_kernel|launch_legacy_kernel)$"
)
# Template arguments that are data types or helpers, never the work itself.
PLAIN_TYPES = re.compile(
    r"^(void|bool|char|wchar_t|short|int|long|float|double|unsigned|signed|size_t|"
    r"u?int\d+_t|__half|__half2|half|__nv_bfloat16|__nv_bfloat162|__nv_fp8\w*|Half|BFloat16|"
    r"complex|Float8_\w+|float\d*_t|bfloat16_t|half_t|tfloat32_t|float_e\w+|array|Array|"
    r"T\d+|OpaqueType|TrivialOffsetCalculator|OffsetCalculator|LoadWithCast|StoreWithCast|"
    r"LoadWithoutCast|StoreWithoutCast|TensorListMetadata|FusedOptimizerTensorListMetadata|"
    r"TensorInfo|GenericPackedTensorAccessor|PackedTensorAccessor\d*|RestrictPtrTraits|"
    r"DefaultPtrTraits|CUDAGeneratorImpl|decltype)$"
)
_VALUE = re.compile(r"^(\(|-?\d|true\b|false\b|nullptr\b)")
_DECORATION = re.compile(r"^((const|volatile|struct|class|typename|enum)\s+)+|\s+(const|volatile)$")


def _functor(arg: str, depth: int = 0) -> str | None:
    """The qualified name of the work inside one template argument, or None."""
    text = _DECORATION.sub("", arg.strip().lstrip("&*").strip()).rstrip("*& ")
    if not text or _VALUE.match(text) or depth > 8:
        return None
    p = parse(text)
    base = p.base
    if base is None or PLAIN_TYPES.match(base.name):
        return None
    if WRAPPERS.match(base.name):
        for inner in base.template_args:
            found = _functor(inner, depth + 1)
            if found:
                return found
        return None
    names = [c.name for c in p.components[: p.components.index(base) + 1] if not c.is_anonymous]
    return "::".join(names)


def is_generic(p: ParsedName) -> bool:
    if GENERIC_LAUNCHERS.match(p.function):
        return True
    if p.function == "kentry" and "ck_tile" in p.scope:  # composable kernel's launcher: kentry<256, 1, Kernel>
        return True
    return bool(CUTLASS_LAUNCHERS.match(p.function)) and "cutlass" in p.scope


def functor(p: ParsedName) -> str | None:
    """For a generic launcher, the functor it runs (see the module doc), else None."""
    if not is_generic(p):
        return None
    for arg in p.template_args:
        found = _functor(arg)
        if found:
            return found
    return None


@lru_cache(maxsize=65536)
def subjects(name: str) -> tuple[str, ...]:
    """The texts a kernel name is classified by, in the order they are tried."""
    p = parse(name)
    out: list[str] = []
    f = functor(p)
    if f:
        out.append(f)
    out.append(p.base_name)
    scope = "::".join(
        c.name for c in p.components[:-1] if not (c.is_anonymous or c.is_lambda)
    )
    if scope:
        out.append(scope)
    return tuple(out)
