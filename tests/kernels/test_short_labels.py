"""Kernel labels: distinct, short, deterministic, and readable on real kernel families."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.kernels.labels import LABEL_MAX, compact, kernel_labels, parse
from nsys_llm_explainer.render.escape import shorten
from tests.kernel_names_public import KNOWN_KERNELS

FAST = settings(max_examples=300)

# Real PyTorch instances (from the shared traces) that a head...tail cut renders alike.
VEC = "void at::native::vectorized_elementwise_kernel<(int)4, {f}, std::array<char *, (unsigned long){n}>>(int, T2, T3)"
ADD = VEC.format(f="at::native::CUDAFunctorOnSelf_add<float>", n=2)
FILL = VEC.format(f="at::native::FillFunctor<float>", n=1)
ABS = VEC.format(f="at::native::AbsFunctor<float>", n=2)
MULS = VEC.format(
    f="at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>", n=2
)
EW = (
    "void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<{f}>"
    "(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)"
)
MUL = EW.format(f="at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>")
COPY = EW.format(
    f="at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const"
    "::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)]"
)
POW = (
    "void at::native::vectorized_elementwise_kernel<(int)4, void at::native::<unnamed>::"
    "pow_tensor_scalar_kernel_impl<float, float>(at::TensorIteratorBase &, T2)::[lambda(float) (instance {i})], "
    "std::array<char *, (unsigned long)2>>(int, T2, T3)"
)
# TensorRT convolution tactics: one long C name each, differing in the middle.
TRT = "sm86_xmma_fprop_implicit_gemm_indexed_f16f16_f16f32_f32_nhwckrsc_nchw_tilesize{t}_stage{s}_warpsize{w}_g1_" \
      "tensor16x8x16_aligna4_alignc4_execute_kernel_trt"
TACTICS = [("128x128x32", 4, "2x2x1"), ("128x64x32", 4, "2x2x1"), ("64x64x64", 5, "2x2x1"),
           ("256x64x32", 3, "4x1x1"), ("64x128x32", 4, "2x2x1")]


def sha4(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()[:4]


def test_elementwise_instances_show_their_functor():
    labels = kernel_labels([ADD, FILL, ABS, MULS])
    assert labels == {
        ADD: "vectorized_elementwise_kernel<CUDAFunctorOnSelf_add<float>>",
        FILL: "vectorized_elementwise_kernel<FillFunctor<float>>",
        ABS: "vectorized_elementwise_kernel<AbsFunctor<float>>",
        # 66 characters in full: the scalar type arguments of the outer functor go first.
        MULS: "vectorized_elementwise_kernel<AUnaryFunctor<MulFunctor<float>>>",
    }
    # The old head...tail cut made the unary ones one string.
    assert len({shorten(n, 80) for n in (ADD, ABS, MULS)}) == 1


def test_lambdas_inside_kernel_templates_reduce_to_what_differs():
    labels = kernel_labels([MUL, COPY])
    assert labels[MUL] == "elementwise_kernel<BinaryFunctor<MulFunctor<float>>>"
    assert labels[COPY] == "elementwise_kernel<direct_copy_kernel_cuda::lambda(float)>"


# rocPRIM (ROCm) scan kernel from the SGLang MI300X trace: a generic lambda's templated call
# operator, `operator()<A, B>(A, B) const`, inside the kernel's template arguments.
ROCPRIM_SCAN = (
    "void rocprim::detail::trampoline_kernel<rocprim::detail::wrapped_scan_config<rocprim::default_config, long>, "
    "rocprim::detail::scan_impl<false, long const*, long*, long, std::plus<long>, long>(void*, unsigned long&, "
    "long const*, long*)::{lambda(auto:1, auto:2)#1}::operator()<std::integral_constant<bool, false>, "
    "std::integral_constant<bool, true> >(std::integral_constant<bool, false>, std::integral_constant<bool, true>) "
    "const::{lambda(auto:1)#2}, rocprim::detail::default_config_selector>(rocprim::detail::scan_impl<false, "
    "long const*, long*, long, std::plus<long>, long>(void*, unsigned long&, long const*, long*)::"
    "{lambda(auto:1, auto:2)#1}::operator()<std::integral_constant<bool, false>, std::integral_constant<bool, true> >"
    "(std::integral_constant<bool, false>, std::integral_constant<bool, true>) const::{lambda(auto:1)#2})"
)


def test_a_templated_call_operator_parses_like_a_plain_one():
    parts = parse(ROCPRIM_SCAN)
    assert parts is not None and parts.base == "trampoline_kernel" and parts.scope == "rocprim::detail"
    assert kernel_labels([ROCPRIM_SCAN]) == {ROCPRIM_SCAN: "trampoline_kernel"}


def test_a_function_name_alone_when_no_other_kernel_shares_it():
    """No functor among the arguments: the function name; with one, the functor too, the
    same label as among its family (a kernel reads the same in every report)."""
    flash = next(n for n, _ in KNOWN_KERNELS if n.startswith("void flash_fwd_kernel<"))
    assert kernel_labels([flash, ADD]) == {
        flash: "flash_fwd_kernel", ADD: "vectorized_elementwise_kernel<CUDAFunctorOnSelf_add<float>>"}
    assert kernel_labels([ADD])[ADD] == kernel_labels([ADD, FILL, ABS])[ADD]


# The older demangler style (PyTorch profiler traces): `> >`, full parameter lists.
OLD_VEC = ("void at::native::vectorized_elementwise_kernel<{w}, {f}, at::detail::Array<char*, {n}> >"
           "(int, {f}, at::detail::Array<char*, {n}>)")
OLD_AMUL = "at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >"
OLD_FILL = "at::native::FillFunctor<float>"
OLD_NEG = ("at::native::neg_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::"
           "{lambda()#7}::operator()() const::{lambda(float)#1}")
REDUCE = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<{t}, at::native::func_wrapper_t<{t}, "
          "at::native::sum_functor<{t}, {t}, {t}>::operator()(at::TensorIterator&)::{{lambda({t}, {t})#1}}>, "
          "unsigned int, {t}, 4> >(at::native::ReduceOp<{t}, at::native::func_wrapper_t<{t}, "
          "at::native::sum_functor<{t}, {t}, {t}>::operator()(at::TensorIterator&)::{{lambda({t}, {t})#1}}>, "
          "unsigned int, {t}, 4>)")
COPY_LONG = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
             "at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 4)]"
             "::operator ()() const::[lambda(long) (instance 1)], std::array<char *, (unsigned long)2>, "
             "TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
             "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>>(int, T1, T2, T3, T4, T5, T6)")


def test_labels_keep_the_functor_and_drop_pointer_arrays_and_parameter_lists():
    names = [OLD_VEC.format(w=w, f=f, n=n) for w, f, n in
             ((4, OLD_AMUL, 2), (2, OLD_AMUL, 2), (4, OLD_FILL, 1), (2, OLD_FILL, 1), (4, OLD_NEG, 2))]
    labels = kernel_labels(names)
    assert [labels[n] for n in names] == [
        "vectorized_elementwise_kernel<4,AUnary…<MulFunctor<float>>>",
        "vectorized_elementwise_kernel<2,AUnary…<MulFunctor<float>>>",
        "vectorized_elementwise_kernel<4, FillFunctor<float>>",
        "vectorized_elementwise_kernel<2, FillFunctor<float>>",
        "vectorized_elementwise_kernel<4, neg_kernel_cuda::lambda(float)>",
    ]


def test_long_functors_lose_whole_words_not_parts_of_them():
    sums = [REDUCE.format(t=t) for t in ("float", "long")]
    labels = kernel_labels([*sums, COPY_LONG])
    assert labels[COPY_LONG] == "unrolled_elementwise_kernel<direct_copy_kernel_cuda(long)>"
    assert [labels[n] for n in sums] == [
        "reduce_kernel<Reduce…<func…<sum_functor<float>(float,float)>,4>>",
        "reduce_kernel<ReduceOp<func…<sum_functor<long>(long,long)>,4>>",
    ]
    for label in labels.values():
        assert label.count("<") == label.count(">") and label.count("(") == label.count(")"), label


def test_shorten_words_and_core():
    from nsys_llm_explainer.kernels.labels import core, shorten_words

    assert shorten_words("direct_copy_kernel_cuda::lambda(long)", 33) == "direct_copy_kernel…::lambda(long)"
    assert shorten_words("4,AUnaryFunctor<MulFunctor<float>>", 33) == "4,AUnary…<MulFunctor<float>>"
    assert core("ReduceOp<func_wrapper_t<float,sum_functor<float>::lambda(float,float)>,4>") == (
        "…sum_functor<float>::lambda(float,float)")
    assert core("FillFunctor<float>") == "FillFunctor<float>"


def test_cutlass_wrappers_show_their_first_argument():
    name = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(T1::Params)"
    label = kernel_labels([name])[name]
    assert label.startswith("Kernel2<cutlass_80_wmma_") and label.endswith("_tn_align8>")
    assert len(label) <= LABEL_MAX


def test_long_names_of_one_family_read_alike_even_without_a_clash():
    one = ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f16_f16_nhwckrsc_nhwc_tilesize128x128x32_stage3_t1r3s3_"
           "execute_kernel_trt")
    two = one.replace("t1r3s3", "t1r1s1").replace("tilesize128x128x32", "tilesize64x64x64")
    labels = kernel_labels([one, two])
    assert labels == {one: "sm80…tilesize128x128x32_t1r3s3…trt", two: "sm80…tilesize64x64x64_t1r1s1…trt"}


def test_tensorrt_tactics_show_the_tokens_that_differ():
    names = [TRT.format(t=t, s=s, w=w) for t, s, w in TACTICS]
    labels = kernel_labels(names)
    assert [labels[n] for n in names] == [
        f"sm86…tilesize{t}_stage{s}_warpsize{w}…trt" for t, s, w in TACTICS
    ]


def test_names_that_differ_only_in_a_lambda_instance_get_a_hash_suffix():
    one, two = POW.format(i=1), POW.format(i=2)
    labels = kernel_labels([one, two])
    assert labels[one].endswith(f" #{sha4(one)}") and labels[two].endswith(f" #{sha4(two)}")
    assert labels[one][: -len(" #xxxx")] == labels[two][: -len(" #xxxx")]
    assert len(labels[one]) <= LABEL_MAX


def test_short_plain_names_are_kept_whole():
    names = ["nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "triton_poi_fused_add_0", "kernel_mha"]
    assert kernel_labels(names) == {n: n for n in names}


def test_compact_drops_namespaces_casts_and_parameter_lists():
    assert compact("std::array<char *, (unsigned long)3>") == "array<char*, 3>"
    assert compact("(bool)0") == "false"
    assert compact("at::native::<unnamed>::masked_fill_kernel(at::TensorIterator &)::[lambda() (instance 1)]") == (
        "masked_fill_kernel::lambda()"
    )


def test_parse_splits_the_top_level():
    p = parse(ADD)
    assert p is not None
    assert (p.scope, p.base, p.params) == ("at::native", "vectorized_elementwise_kernel", "int, T2, T3")
    assert p.args == ("(int)4", "at::native::CUDAFunctorOnSelf_add<float>", "std::array<char *, (unsigned long)2>")
    assert parse("ampere_sgemm_128x64_nn") is None
    assert parse("(unnamed kernel #3)") is None


def test_real_kernel_catalogue_gets_distinct_short_labels():
    names = [n for n, _ in KNOWN_KERNELS]
    labels = kernel_labels(names)
    assert len(set(labels.values())) == len(set(names))
    assert all(0 < len(v) <= LABEL_MAX for v in labels.values())


# --- properties -----------------------------------------------------------------------

ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
scalar = st.sampled_from(["float", "int", "(int)4", "(bool)0", "c10::Half", "long", "char *", "T1"])


@st.composite
def template_arg(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 3 if depth < 2 else 1))
    if kind == 0:
        return draw(scalar)
    if kind == 1:
        return "::".join(draw(st.lists(ident, min_size=1, max_size=3)))
    if kind == 2:
        inner = draw(st.lists(template_arg(depth + 1), min_size=1, max_size=3))
        return f"{draw(ident)}<{', '.join(inner)}>"
    return f"{draw(ident)}(at::TensorIteratorBase &)::[lambda({draw(scalar)}) (instance {draw(st.integers(1, 9))})]"


@st.composite
def demangled(draw: st.DrawFn) -> str:
    scope = "::".join(draw(st.lists(st.sampled_from(["at", "native", "<unnamed>", "cub", "flash"]), max_size=3)))
    base = draw(st.sampled_from(["elementwise_kernel", "reduce_kernel", "Kernel2", "gemm", draw(ident)]))
    args = draw(st.lists(template_arg(), min_size=0, max_size=4))
    params = draw(st.sampled_from(["int, T2, T3", "", "T1::Params", "float *, int"]))
    head = f"{scope}::{base}" if scope else base
    return f"void {head}<{', '.join(args)}>({params})" if args else f"{head}({params})"


@st.composite
def long_c_name(draw: st.DrawFn) -> str:
    tokens = draw(st.lists(st.sampled_from(["sm80", "xmma", "gemm", "tilesize64x64", "tilesize128x32", "stage3",
                                            "stage4", "warpsize2x2x1", "split", "k", "kernel", "trt", "cublas"]),
                           min_size=3, max_size=25))
    return "_".join(tokens)


any_name = st.one_of(
    st.text(max_size=120),
    demangled(),
    long_c_name(),
    st.builds(lambda n, h: f"{n} #{h}", st.text(max_size=20), st.from_regex(r"[0-9a-f]{4}", fullmatch=True)),
)


@FAST
@given(st.lists(any_name, max_size=25))
def test_distinct_names_get_distinct_short_labels(names: list[str]) -> None:
    labels = kernel_labels(names)
    assert set(labels) == set(names)
    assert len(set(labels.values())) == len(labels)
    assert all(len(v) <= LABEL_MAX for v in labels.values())


@FAST
@given(st.lists(any_name, max_size=25), st.randoms(use_true_random=False))
def test_labels_do_not_depend_on_order_or_repeats(names: list[str], rnd: random.Random) -> None:
    shuffled = names + names[: len(names) // 2]
    rnd.shuffle(shuffled)
    assert kernel_labels(shuffled) == kernel_labels(names)


@pytest.mark.slow
@FAST
@given(st.lists(demangled(), min_size=2, max_size=12, unique=True))
def test_same_function_name_groups_stay_distinct(names: list[str]) -> None:
    labels = kernel_labels(names)
    assert len(set(labels.values())) == len(names)
