"""demangled.parse and kernel_subject.subjects: the parts of demangled names in both
spellings found in traces (Nsight Systems and c++filt), by hand."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.kernels.demangled import parse, subjects
from tests.kernel_names_public import KNOWN_KERNELS
from tests.kernel_names_traces import TRACE_KERNELS


def test_void_namespace_template_and_params():
    p = parse(
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, "
        "std::array<char *, (unsigned long)1>>(int, T2, T3)"
    )
    assert p.return_type == "void"
    assert p.scope == ("at", "native")
    assert p.function == "vectorized_elementwise_kernel"
    assert p.template_args == (
        "(int)4", "at::native::FillFunctor<float>", "std::array<char *, (unsigned long)1>")
    assert p.params == "int, T2, T3"


def test_name_without_template_or_params_is_the_whole_text():
    for name in ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize32x32x8_ffma_execute_kernel",
                 "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN",
                 "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_T1_"):
        p = parse(name)
        assert (p.function, p.scope, p.template_args, p.params, p.return_type) == (
            name, (), (), None, "")


def test_params_without_return_type():
    p = parse("saxpy(double *, double *, double *, double, int)")
    assert (p.function, p.params, p.return_type) == ("saxpy", "double *, double *, double *, double, int", "")


@pytest.mark.parametrize(
    "name, scope",
    [
        ("void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int)",
         ("at", "native", "(anonymous namespace)")),
        ("void at::native::<unnamed>::CatArrayBatchedCopy<float>(char *)", ("at", "native", "<unnamed>")),
        ("<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__half, (int)3, (int)3>)",
         ("<unnamed>",)),
        ("void (anonymous namespace)::elementwise_kernel_with_index<int>(int)", ("(anonymous namespace)",)),
    ],
)
def test_anonymous_namespaces(name, scope):
    p = parse(name)
    assert p.scope == scope
    assert p.function in name and "<" not in p.function and "(" not in p.function


def test_nested_brackets_split_template_arguments_at_top_level_only():
    p = parse("void f<A<B<int, float>, C<(int)2>>, std::array<char *, 2> >(X<Y<Z>>, int (*)(float))")
    assert p.template_args == ("A<B<int, float>, C<(int)2>>", "std::array<char *, 2>")
    assert p.params == "X<Y<Z>>, int (*)(float)"


@pytest.mark.parametrize(
    "name, function, scope",
    [
        ("void at::native::f(at::TensorIteratorBase &)::[lambda() (instance 1)]::operator ()() const",
         "operator()", ("at", "native", "f", "[lambda() (instance 1)]")),
        ("ns::Foo<int>::operator<<(std::ostream &)", "operator<<", ("ns", "Foo")),
        ("bool ns::operator<(const A &, const B &)", "operator<", ("ns",)),
        ("ns::Ptr<T>::operator->() const", "operator->", ("ns", "Ptr")),
        ("void *ns::Alloc::operator new(unsigned long)", "operator new", ("ns", "Alloc")),
        ("ns::X::operator[](int)", "operator[]", ("ns", "X")),
    ],
)
def test_operator_names_are_names(name, function, scope):
    p = parse(name)
    assert (p.function, p.scope) == (function, scope)


def test_lambda_spellings_and_base_name():
    nsys = ("at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]"
            "::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)]")
    cxxfilt = ("at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
               "const::{lambda()#7}::operator()() const::{lambda(float)#1}")
    for text, params in ((nsys, "at::TensorIteratorBase &"), (cxxfilt, "at::TensorIteratorBase&")):
        p = parse(text)
        assert p.components[-1].is_lambda and p.function.endswith(("(instance 1)]", "#1}"))
        assert p.base_name == "direct_copy_kernel_cuda"
        assert p.qualified(p.base) == "at::native::direct_copy_kernel_cuda"
        assert p.components[2].params == params


def test_text_after_the_parameter_list_is_not_the_name():
    p = parse("void deep_gemm::fp8_gemm_kernel<128u>(float *) grouped_gemm")
    assert (p.function, p.scope) == ("fp8_gemm_kernel", ("deep_gemm",))


def test_unbalanced_brackets_do_not_fail():
    p = parse("void ns::broken<int, (float(x>")
    assert p.function == "broken" and p.scope == ("ns",)


@settings(max_examples=300)
@given(st.text(alphabet="ab_:<>()[]{}, &*#0123456789 ", max_size=60))
def test_parser_never_raises(text):
    p = parse(text)
    assert isinstance(p.function, str) and isinstance(p.scope, tuple)
    subjects(text)


@pytest.mark.parametrize("name, category", KNOWN_KERNELS + TRACE_KERNELS)
def test_function_names_never_keep_brackets(name, category):
    p = parse(name)
    assert not any(ch in p.base_name for ch in "<(") or p.base_name.startswith(("[", "{"))


@pytest.mark.parametrize(
    "name, first",
    [
        # PyTorch launchers: the functor, looking through wrappers and skipping values/types.
        ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<c10::Half>, "
         "std::array<char *, (unsigned long)1>>(int, T2, T3)", "at::native::FillFunctor"),
        ("void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<"
         "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float>>>"
         "(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)",
         "at::native::binary_internal::MulFunctor"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
         "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps"
         "<float, float, float, float>, unsigned int, float, 4>)", "at::native::MeanOps"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<long, at::native::func_wrapper_t<long, "
         "at::native::sum_functor<long, long, long>::operator()(at::TensorIterator&)::{lambda(long, long)#1}>, "
         "unsigned int, long, 4> >(int)", "at::native::sum_functor"),
        ("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, adamMode_t>(int)",
         "AdamFunctor"),
        # CUTLASS launchers: the operator, with its namespaces.
        ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align1>(cutlass_80_tensorop_"
         "s1688gemm_64x64_32x6_tn_align1::Params)", "cutlass_80_tensorop_s1688gemm_64x64_32x6_tn_align1"),
        ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<int>>>(T1::Params)",
         "flash::FlashAttnFwdSm90"),
        # Other kernels: the function name first.
        ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>"
         "(cudnn::ops::nchw2nhwc_params_t<float>, float const*, float*)", "nchwToNhwcKernel"),
    ],
)
def test_subjects_start_with_the_work(name, first):
    assert subjects(name)[0] == first


def test_subjects_end_with_the_namespaces():
    assert subjects("void deep_ep::intranode::dispatch<8, 768, 8192>(int4 *)") == (
        "dispatch", "deep_ep::intranode")
    # A launcher without a recognizable functor falls back to its own name.
    assert subjects("void at::native::vectorized_elementwise_kernel<4, float, std::array<char *, 2>>(int)") == (
        "vectorized_elementwise_kernel", "at::native")
