"""Property: achieved TFLOP/s never exceed the dtype's peak by more than the stated tolerance
(roofline.PLAUSIBLE_TOLERANCE, 10%) without the row being flagged implausible and the report
saying that the shapes, the dtype or the peak figure is wrong."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.efficiency import implausible_note, place
from nsys_llm_explainer.compute.peaks import PLAUSIBLE_TOLERANCE, DevicePeaks
from tests.conftest import analyze
from tests.fixtures.builder import TraceBuilder

H100 = "NVIDIA H100 80GB HBM3"
SPEC = peaks.lookup(H100)
assert SPEC is not None
DP = DevicePeaks([0], {0: peaks.ResolvedPeaks(SPEC, "table", "H100")}, {0: H100}, "built-in")

rows = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=10**16),  # FLOPs
        st.integers(min_value=1, max_value=10**12),  # bytes
        st.integers(min_value=1, max_value=10**9),  # kernel ns
        st.sampled_from(["bf16", "fp8", "tf32", "fp32", "fp16"]),
    ),
    min_size=1,
    max_size=12,
)


@given(rows)
@settings(max_examples=300)
def test_rows_above_peak_are_always_flagged(data: list[tuple[int, int, int, str]]) -> None:
    frame = place(pd.DataFrame({
        "device_id": [0] * len(data), "compute_dtype": [r[3] for r in data],
        "flops": [r[0] for r in data], "bytes": [r[1] for r in data], "kernel_ns": [r[2] for r in data],
        "label": [f"op{i}" for i in range(len(data))],
    }), DP)
    over = [r[0] / (r[2] * 1e-9) > SPEC.peak_tflops(r[3]) * 1e12 * (1 + PLAUSIBLE_TOLERANCE) for r in data]
    assert frame["implausible"].tolist() == over
    note = implausible_note(frame)
    assert (note is not None) == any(over)
    if note:
        assert "the shapes, the dtype or the peak figure is wrong" in note


@given(m=st.integers(1, 8192), n=st.integers(1, 8192), k=st.integers(1, 8192), dur=st.integers(1, 200_000))
@settings(max_examples=15)
def test_metric_warns_whenever_a_gemm_beats_its_peak(tmp_path_factory, m: int, n: int, k: int, dur: int) -> None:
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0, name=H100)
    b.nvtx(1_000, 10_000, text=f"aten::mm, seq = 1, sizes = [[{m}, {k}], [{k}, {n}]]")
    b.runtime(2_000, 3_000, corr=1)
    b.kernel(5_000, 5_000 + dur, corr=1, name="sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_kernel")
    report = analyze(b.write(tmp_path_factory.mktemp("p") / "t.sqlite"))
    res = report.metrics["compute_efficiency"]
    achieved = 2 * m * n * k / (dur * 1e-9)
    flagged = achieved > 989.5e12 * (1 + PLAUSIBLE_TOLERANCE)
    (op,) = res.data["operations"]  # type: ignore[union-attr]
    assert op["implausible"] is flagged
    assert any("peak figure is wrong" in n for n in res.notes) is flagged  # type: ignore[union-attr]
