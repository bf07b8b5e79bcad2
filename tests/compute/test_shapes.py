"""Operator shapes from Kineto args and from PyTorch NVTX range names."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute import dtypes
from nsys_llm_explainer.compute.shapes import (
    Arg,
    OpShapes,
    Uncounted,
    from_kineto,
    parse_int_list,
    parse_nvtx_name,
    shapes_from_nvtx,
)
from tests.conftest import SHARED_TRACES

KINETO = SHARED_TRACES / "kineto"
FAST = settings(max_examples=200)


def kineto_events(name: str) -> list[dict]:
    path = KINETO / name
    if not path.is_file():
        pytest.skip(f"shared Kineto trace {path} not found (a clone outside /work)")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


def test_kineto_addmm_from_the_qwen_trace():
    args = {
        "Concrete Inputs": ["", "", "", "1", "1"],
        "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"],
        "Input Dims": [[1024], [8944, 1024], [1024, 1024], [], []],
    }
    s = from_kineto("aten::addmm", args)
    assert isinstance(s, OpShapes)
    assert [a.dims for a in s.args] == [(1024,), (8944, 1024), (1024, 1024), None, None]
    assert s.dtype == "bf16" and s.dtype_source == "stated" and s.concrete
    assert s.arg(3).value == "1" and s.arg(9) == Arg()  # beyond the recorded args: None


def test_kineto_zero_dim_tensors_scalars_lists_and_none():
    args = {
        "Input Dims": [[], [], [[1, 559, 32], [1, 559, 32]], [], [4]],
        "Input type": ["long int", "Scalar", "TensorList", "", "c10::Float8_e4m3fn"],
    }
    s = from_kineto("aten::x", args)
    assert s.arg(0).dims == () and s.arg(0).dtype == "int64"  # a 0-dim tensor
    assert not s.arg(1).is_tensor and not s.arg(3).is_tensor
    assert s.arg(2).items == ((1, 559, 32), (1, 559, 32))
    assert s.arg(4).dtype == "fp8_e4m3" and not s.concrete
    assert [d for d, _ in s.tensors()] == [(), (1, 559, 32), (1, 559, 32), (4,)]


def test_kineto_without_types_keeps_tensors_and_assumes_the_dtype():
    s = from_kineto("aten::mm", {"Input Dims": [[2, 3], [3, 4]]}, fallback_dtype="float16")
    assert [a.dims for a in s.args] == [(2, 3), (3, 4)]
    assert s.dtype == "fp16" and s.dtype_source == "assumed"


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"Input Dims": "[[1]]"},
        {"Input Dims": [[-1]]},
        {"Input Dims": [[True]]},
        {"Input Dims": [[1.5]]},
        {"Input Dims": [[1 << 60]]},
        {"Input Dims": [list(range(1, 20))]},
        {"Input Dims": [[[1], "x"]], "Input type": ["TensorList"]},
    ],
)
def test_kineto_malformed_args_are_uncounted(args):
    result = from_kineto("aten::mm", args)
    assert isinstance(result, Uncounted) and result.reason


def test_kineto_type_names():
    expected = {
        "float": ("fp32", 4),
        "double": ("fp64", 8),
        "c10::BFloat16": ("bf16", 2),
        "c10::Half": ("fp16", 2),
        "c10::Float8_e4m3fn": ("fp8_e4m3", 1),
        "c10::Float8_e5m2": ("fp8_e5m2", 1),
        "long int": ("int64", 8),
        "long": ("int64", 8),
        "int": ("int32", 4),
        "bool": ("bool", 1),
        "unsigned char": ("uint8", 1),
        "c10::complex<float>": ("complex64", 8),
    }
    for name, (canon, size) in expected.items():
        assert dtypes.from_kineto(name) == canon and dtypes.size(canon) == size
    for name in ("Scalar", "", "ScalarList", "TensorList", None, 3):
        assert dtypes.from_kineto(name) is None
    assert dtypes.from_scalar_type("15") == "bf16" and dtypes.from_scalar_type("6") == "fp32"
    assert dtypes.from_scalar_type("24") == "fp8_e4m3" and dtypes.from_scalar_type("x") is None
    assert dtypes.normalize("torch.bfloat16") == "bf16" and dtypes.normalize("half") == "fp16"
    with pytest.raises(ValueError):
        dtypes.normalize("fp7")


def test_concrete_value_parsing():
    assert parse_int_list("[1, 2]") == (1, 2) and parse_int_list("3") == (3,)
    assert parse_int_list("[]") == () and parse_int_list("[-1]") == (-1,)
    assert parse_int_list("") is None and parse_int_list("[a]") is None


def test_real_kineto_ops_all_parse():
    for trace in ("hf_qwen1.5_0.5b_h100.json.gz", "hta_a100_80gb_rank0.json.gz"):
        parsed = 0
        for e in kineto_events(trace):
            if e.get("cat") != "cpu_op" or "Input Dims" not in e.get("args", {}):
                continue
            s = from_kineto(e["name"], e["args"])
            assert isinstance(s, OpShapes), (e["name"], s)
            if any(a.is_tensor and a.dims for a in s.args):
                parsed += 1
        assert parsed > 1000, trace


NVTX = (
    "aten::addmm, seq = 12, op_id = 5, sizes = [[4096], [8, 4096], [4096, 4096], [], []], "
    "input_op_ids = [(3,0), (4,0), (0,-1), (0,-1), (0,-1)]"
)


def test_nvtx_name_with_every_part():
    op = parse_nvtx_name(NVTX)
    assert op.name == "aten::addmm" and (op.seq, op.op_id) == (12, 5)
    assert op.sizes == ((4096,), (8, 4096), (4096, 4096), (), ())
    assert op.input_op_ids == ((3, 0), (4, 0), (0, -1), (0, -1), (0, -1))
    assert op.extras == () and not op.is_backward


def test_nvtx_name_variants():
    old = parse_nvtx_name("addmm, seq=7")
    assert old.name == "addmm" and old.seq == 7 and old.sizes is None
    back = parse_nvtx_name("MmBackward0, stashed seq=7")
    assert back.stashed_seq == 7 and back.is_backward
    stack = parse_nvtx_name("aten::stack, op_id = 317124")
    assert stack.name == "aten::stack" and stack.op_id == 317124
    extra = parse_nvtx_name("aten::mm, op_id = 3, stack = [a.py(1): f], sizes = [[2, 3], [3, 4]]")
    assert extra.sizes == ((2, 3), (3, 4)) and extra.extras == ("stack = [a.py(1): f]",)
    assert parse_nvtx_name("decode step 3") is None
    broken = parse_nvtx_name("aten::mm, sizes = [[2, 3], [3")
    assert broken.sizes is None


def test_shapes_from_nvtx_assume_the_given_dtype():
    s = shapes_from_nvtx(NVTX, "bfloat16", "kernel name contains 'bf16'")
    assert s.op == "aten::addmm" and s.source == "nvtx"
    assert (s.dtype, s.dtype_source, s.dtype_evidence) == (
        "bf16",
        "assumed",
        "kernel name contains 'bf16'",
    )
    assert [a.dims for a in s.args] == [(4096,), (8, 4096), (4096, 4096), None, None]
    no_sizes = shapes_from_nvtx("aten::mm, seq = 1", "bf16")
    assert isinstance(no_sizes, Uncounted) and "no sizes" in no_sizes.reason
    assert isinstance(shapes_from_nvtx("not an op", "bf16"), Uncounted)


@FAST
@given(st.text(max_size=300))
def test_nvtx_parser_never_raises(text):
    op = parse_nvtx_name(text)
    assert op is None or isinstance(op.name, str)
    parse_nvtx_name("aten::mm, sizes = " + text)


@FAST
@given(st.lists(st.lists(st.integers(0, 10**6), max_size=5), max_size=6))
def test_nvtx_sizes_round_trip(sizes):
    text = (
        "aten::x, op_id = 1, sizes = ["
        + ", ".join("[" + ", ".join(str(d) for d in s) + "]" for s in sizes)
        + "]"
    )
    assert parse_nvtx_name(text).sizes == tuple(tuple(s) for s in sizes)


def test_real_nvtx_operator_names_parse():
    path = SHARED_TRACES / "nsys" / "nsysai_h100_2gpu_1s.sqlite"
    if not path.is_file():
        pytest.skip(f"shared trace {path} not found (a clone outside /work)")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT coalesce(n.text, s.value) FROM NVTX_EVENTS n "
            "LEFT JOIN StringIds s ON n.textId = s.id"
        ).fetchall()
    finally:
        con.close()
    ops = [t for (t,) in rows if isinstance(t, str) and t.startswith("aten::") and "op_id" in t]
    assert len(ops) > 1000
    for text in ops:
        op = parse_nvtx_name(text)
        assert op is not None and op.op_id is not None and op.name.startswith("aten::")
        assert op.sizes is None  # this capture ran without record_shapes
        assert Path(op.name).name  # a plain name, no key text left in it
        assert "op_id" not in op.name
