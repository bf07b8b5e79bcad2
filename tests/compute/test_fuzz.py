"""Hostile and random operator records: every formula returns a cost or a reason, never an
exception, and never a negative count."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute import attention, conv
from nsys_llm_explainer.compute.cost import OpCost
from nsys_llm_explainer.compute.opcost import GEMM, cost_kineto, cost_nvtx
from nsys_llm_explainer.compute.shapes import Uncounted

OPS = sorted(
    {f"aten::{n}" for n in (*GEMM, *conv.SIGNATURES, *attention.OPS)}
    | {"aten::convolution_backward", "aten::mean", "aten::sum", "aten::embedding", "aten::index_select",
       "aten::add_", "aten::cat", "aten::_to_copy", "aten::zeros", "aten::native_layer_norm",
       "aten::_softmax", "aten::embedding_dense_backward", "aten::mv", "aten::copy_"}
)  # fmt: skip
TYPES = [
    "c10::BFloat16",
    "float",
    "long int",
    "Scalar",
    "ScalarList",
    "TensorList",
    "",
    "bool",
    "weird",
]
VALUES = ["", "True", "False", "0", "1", "-1", "15", "[0, 0]", "[-2, 3]", "[1, 1]", "[2]", "same", "'valid'",
          "[True, False, True]", "1e400", "[", "nan"]  # fmt: skip
DIM = st.integers(0, 70)
DIMS = st.one_of(
    st.lists(DIM, max_size=5),
    st.lists(st.lists(DIM, max_size=4), min_size=1, max_size=3),
    st.just("junk"),
    st.lists(st.one_of(DIM, st.just(-1), st.just(True), st.just(1.5)), max_size=3),
)
FUZZ = settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(
    op=st.sampled_from(OPS),
    dims=st.lists(DIMS, max_size=16),
    types=st.lists(st.sampled_from(TYPES), max_size=16),
    values=st.one_of(st.none(), st.lists(st.sampled_from(VALUES), max_size=16)),
)
def test_kineto_records_never_raise(op, dims, types, values):
    args = {"Input Dims": dims, "Input type": types}
    if values is not None:
        args["Concrete Inputs"] = values
    r = cost_kineto(op, args)
    assert isinstance(r, OpCost | Uncounted)
    if isinstance(r, OpCost):
        assert r.flops >= 0 and r.bytes_read >= 0 and r.bytes_written >= 0 and r.intensity >= 0


@FUZZ
@given(op=st.sampled_from(OPS), sizes=st.lists(st.lists(DIM, max_size=5), max_size=16))
def test_nvtx_records_never_raise(op, sizes):
    text = (
        f"{op}, seq = 1, sizes = ["
        + ", ".join("[" + ", ".join(map(str, s)) + "]" for s in sizes)
        + "]"
    )
    r = cost_nvtx(text, "bf16")
    assert isinstance(r, OpCost | Uncounted)
    if isinstance(r, OpCost):
        assert r.flops >= 0 and r.bytes >= 0 and r.dtype_source == "assumed"


LISTS = st.sampled_from(
    ["[0, 0]", "[-1, 2]", "[1, 1]", "[2, 2]", "[3]", "", "same", "valid", "[1, 1, 1]"]
)


@FUZZ
@given(
    op=st.sampled_from(sorted({*conv.SIGNATURES, "convolution_backward"})),
    x=st.lists(st.integers(0, 9), min_size=3, max_size=5),
    w=st.lists(st.integers(0, 5), min_size=3, max_size=5),
    values=st.lists(
        st.one_of(LISTS, st.sampled_from(["0", "1", "2", "-3", "True", "False"])), max_size=13
    ),
)
def test_convolutions_with_any_parameters_never_raise(op, x, w, values):
    tensors = [x, x, w] if op == "convolution_backward" else [x, w]
    types = ["float"] * len(tensors) + ["ScalarList"] * 11
    args = {"Input Dims": tensors + [[]] * 11, "Input type": types}
    r = cost_kineto(f"aten::{op}", {**args, "Concrete Inputs": [""] * len(tensors) + values})
    assert isinstance(r, OpCost | Uncounted)
    if isinstance(r, OpCost):
        assert r.flops >= 0 and r.bytes_written >= 0
        assert all(o > 0 for o in r.extra.get("output_spatial", (1,)))


@FUZZ
@given(
    op=st.sampled_from(sorted(attention.OPS)),
    q=st.lists(st.integers(0, 9), min_size=3, max_size=4),
    k=st.lists(st.integers(0, 9), min_size=3, max_size=4),
    cum=st.lists(st.integers(0, 5), max_size=2),
    values=st.lists(st.sampled_from(["", "True", "False", "0", "1", "2", "7", "x"]), max_size=15),
)
def test_attention_with_any_shapes_never_raises(op, q, k, cum, values):
    dims = [q, k, k, cum, cum, cum, cum] + [[]] * 8
    types = ["c10::BFloat16"] * 3 + ["int"] * 4 + ["Scalar"] * 8
    r = cost_kineto(
        f"aten::{op}", {"Input Dims": dims, "Input type": types, "Concrete Inputs": values}
    )
    assert isinstance(r, OpCost | Uncounted)
    if isinstance(r, OpCost):
        assert r.flops >= 0 and r.bytes >= 0
