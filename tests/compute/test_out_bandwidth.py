"""The out= forms of elementwise operators (the output tensor is written, never read) and the
flag on operations whose compulsory bytes move faster than the memory peak. Expected bytes and
rates are computed by hand from the sizes below."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.efficiency import bandwidth_note, place
from nsys_llm_explainer.compute.opcost import cost_nvtx
from nsys_llm_explainer.compute.peaks import PLAUSIBLE_TOLERANCE, DevicePeaks
from tests.compute.test_gemm_conv import BF16, F32, kin
from tests.compute.test_gemm_conv import ok as cost_ok
from tests.conftest import analyze, ok
from tests.fixtures.builder import TraceBuilder

A100 = "NVIDIA A100-SXM4-80GB"
SPEC = peaks.lookup(A100)
assert SPEC is not None
DP = DevicePeaks([0], {0: peaks.ResolvedPeaks(SPEC, "table", "A100")}, {0: A100}, "built-in")
BIG = [4, 2798, 2798]
BIG_BYTES = 4 * 2798 * 2798 * 4  # 125,260,864 B of fp32


def test_mul_out_reads_its_inputs_and_writes_the_out_tensor_once():
    # mul.out(self [4, 2798, 2798] fp32, other: a 0-dim double, *, out [4, 2798, 2798] fp32)
    c = cost_ok(kin("aten::mul", [BIG, [], BIG], [F32, "double", F32]))
    assert (c.bytes_read, c.bytes_written) == (BIG_BYTES + 8, BIG_BYTES) == (125_260_872, 125_260_864)
    assert "out= argument" in c.formula and c.dtype == "fp32"


def test_other_out_forms_and_the_forms_without_out():
    x = [64, 32]
    n = 64 * 32
    # add.out(self, other, alpha, *, out): 4 arguments, add's widest other form has 3
    add_out = cost_ok(kin("aten::add", [x, x, [], x], [F32, F32, "Scalar", F32]))
    assert (add_out.bytes_read, add_out.bytes_written) == (2 * n * 4, n * 4)
    # where.self_out(condition bool, self, other, *, out)
    where_out = cost_ok(kin("aten::where", [x, x, x, x], ["bool", BF16, BF16, BF16]))
    assert (where_out.bytes_read, where_out.bytes_written) == (n + 2 * n * 2, n * 2)
    # the same ops without out=: every tensor is an input
    where = cost_ok(kin("aten::where", [x, x, x], ["bool", BF16, BF16]))
    assert (where.bytes_read, where.bytes_written) == (n + 2 * n * 2, n * 2)
    mul = cost_ok(kin("aten::mul", [x, x], [BF16, BF16]))
    assert (mul.bytes_read, mul.bytes_written) == (2 * n * 2, n * 2) and "out=" not in mul.formula
    add = cost_ok(kin("aten::add", [x, x, []], [F32, F32, "Scalar"]))
    assert (add.bytes_read, add.bytes_written) == (2 * n * 4, n * 4) and "out=" not in add.formula
    # a last tensor of another shape is an input (and here the sizes do not broadcast)
    assert "out=" not in getattr(kin("aten::mul", [x, [], [64, 1]], [F32, "double", F32]), "formula", "")
    # NVTX sizes count arguments the same way ([] is a scalar there)
    nv = cost_ok(cost_nvtx("aten::mul, seq = 1, sizes = [[64, 32], [], [64, 32]]", "bf16"))
    assert (nv.bytes_read, nv.bytes_written) == (n * 2, n * 2)
    nv_add = cost_ok(cost_nvtx("aten::add, seq = 1, sizes = [[64, 32], [64, 32], []]", "bf16"))
    assert (nv_add.bytes_read, nv_add.bytes_written) == (2 * n * 2, n * 2)


def test_check_bandwidth_names_l2_or_wrong_shapes():
    w = 2039e9
    assert peaks.check_bandwidth(w * 1.10, w) is None  # at the tolerance: not flagged
    msg = peaks.check_bandwidth(2595e9, w)
    assert msg is not None and "1.27x" in msg and "L2 cache" in msg and "overstate" in msg
    roof = peaks.roofs(SPEC)["fp32"]
    assert peaks.place("mul", 0, 3 * BIG_BYTES, 145e-6, roof).above_bandwidth  # 2,592 GB/s
    assert not peaks.place("mul", 0, 2 * BIG_BYTES, 145e-6, roof).above_bandwidth  # 1,728 GB/s


rows = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=10**12),  # FLOPs
        st.integers(min_value=1, max_value=10**11),  # bytes
        st.integers(min_value=1, max_value=10**8),  # kernel ns
    ),
    min_size=1,
    max_size=10,
)


@given(rows)
@settings(max_examples=200)
def test_rows_above_the_memory_peak_are_always_flagged(data: list[tuple[int, int, int]]) -> None:
    frame = place(pd.DataFrame({
        "device_id": [0] * len(data), "compute_dtype": ["fp32"] * len(data),
        "flops": [r[0] for r in data], "bytes": [r[1] for r in data], "kernel_ns": [r[2] for r in data],
        "label": [f"op{i}" for i in range(len(data))],
    }), DP)
    over = [r[1] / (r[2] * 1e-9) > 2039e9 * (1 + PLAUSIBLE_TOLERANCE) for r in data]
    assert frame["above_bandwidth"].tolist() == over
    note = bandwidth_note(frame, DP)
    assert (note is not None) == any(over)
    if note:
        assert "L2 cache" in note and "2,039 GB/s" in note


def test_the_section_marks_an_operation_above_the_memory_peak(build) -> None:
    # aten::mul on two [8, 4096] bf16 tensors: 3 x 65,536 B = 196,608 B in 50 ns = 3,932 GB/s,
    # 1.17x the H100's 3,350 GB/s: only L2 (or wrong shapes) explains it.
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0, name="NVIDIA H100 80GB HBM3")
    b.nvtx(1_000, 10_000, text="aten::mul, seq = 1, sizes = [[8, 4096], [8, 4096]]")
    b.runtime(2_000, 3_000, corr=1)
    b.kernel(5_000, 5_050, corr=1, name="void at::native::vectorized_elementwise_kernel<4, MulFunctor<float> >()")
    report = analyze(build(b))
    d = ok(report, "compute_efficiency")
    (op,) = d["operations"]
    assert op["bytes"] == 196_608 and op["gbps"] == 3932.2 and op["above_bandwidth"] is True
    assert d["totals"]["above_bandwidth_operations"] == 1
    assert any("L2 cache" in n and "117% of 3,350 GB/s" in n for n in report.metrics["compute_efficiency"].notes)
