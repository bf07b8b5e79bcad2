"""fleet fits the serving latency model across the runs of a sweep: each run alone has one
decode configuration (no fit), together they recover the planted per-sequence and per-KV-token
costs (tests/fixtures/serving_synth.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsys_llm_explainer import fleet
from nsys_llm_explainer.fleet import inputs
from nsys_llm_explainer.fleet.render_text import markdown
from tests.fixtures import serving_synth as ss
from tests.fleet_support import schema_errors


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_a_batch_size_sweep_fits_decode_across_runs(fmt: str, tmp_path: Path) -> None:
    paths = []
    for batch in (1, 2, 4):
        plan = ss.Plan((ss.prefill(1, 64 * batch), *(ss.decode(batch, 100 * batch + 7 * i) for i in range(6))),
                       marks="vllm")
        paths.append(ss.write(plan, tmp_path / f"bs{batch}{'.sqlite' if fmt == 'nsys' else '.json'}", fmt))
    result = fleet.run(inputs.collect([str(p) for p in paths], ["bs=bs(?P<bs>\\d+)"], None), jobs=1,
                       use_cache=False)
    doc = result.doc
    assert not schema_errors(doc)
    fits = {f["phase"]: f for f in doc["sweep"]["fits"]}
    dec = fits["decode"]
    assert dec["runs"] == 3 and dec["iterations"] == 18 and dec["configurations"] == 18
    assert dec["terms"]["ns_per_sequence"] == pytest.approx(
        4 * (ss.GEMM_PER_TOKEN + ss.ROPE_PER_TOKEN + ss.ATTN_PER_TOKEN) + ss.HEAD_PER_SEQ, rel=1e-6)
    assert dec["terms"]["ns_per_kv_token"] == pytest.approx(4 * ss.ATTN_PER_KV, rel=1e-6)
    assert dec["rmse_ns"] == pytest.approx(0.0, abs=1.0)
    # one prefill of one sequence per run: three prompt lengths, fitted only across the runs
    pre = fits["prefill"]
    assert pre["runs"] == 3 and pre["terms"]["ns_per_token"] == pytest.approx(
        4 * (ss.GEMM_PER_TOKEN + ss.ROPE_PER_TOKEN + ss.ATTN_PER_TOKEN + ss.ATTN_PER_KV), rel=1e-6)
    assert "Serving latency model across the runs" in markdown(doc, [])
