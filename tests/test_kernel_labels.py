"""Kernel labels: distinct, short, deterministic, and readable on real kernel families."""

from __future__ import annotations

import hashlib
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis.kernel_labels import LABEL_MAX, compact, kernel_labels, parse
from nsys_llm_explainer.render.escape import shorten
from tests.kernel_names_public import KNOWN_KERNELS

FAST = settings(max_examples=300, deadline=None)

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


def test_a_function_name_alone_when_no_other_kernel_shares_it():
    flash = next(n for n, _ in KNOWN_KERNELS if n.startswith("void flash_fwd_kernel<"))
    assert kernel_labels([flash, ADD]) == {flash: "flash_fwd_kernel", ADD: "vectorized_elementwise_kernel"}


def test_cutlass_wrappers_show_their_first_argument():
    name = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(T1::Params)"
    label = kernel_labels([name])[name]
    assert label.startswith("Kernel2<cutlass_80_wmma_") and label.endswith("_tn_align8>")
    assert len(label) <= LABEL_MAX


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


@FAST
@given(st.lists(demangled(), min_size=2, max_size=12, unique=True))
def test_same_function_name_groups_stay_distinct(names: list[str]) -> None:
    labels = kernel_labels(names)
    assert len(set(labels.values())) == len(names)
