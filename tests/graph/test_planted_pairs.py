"""Planted pairs (benchmarks/planted_pairs.py): one workload with a bottleneck and without
it. The what-if that removes the bottleneck, predicted from the first trace, must land
within 10% of the step time measured on the second; replaying either trace unchanged must
give its measured step times back within 2%."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import planted_pairs as pp
from nsys_llm_explainer.metrics import Context, critical_path, steps, what_if
from nsys_llm_explainer.model import MetricResult
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.trace import formats

STEPS = 14


def _run(path: Path, change: str) -> tuple[dict, dict]:
    data = formats.open_trace(path, jobs=1)
    try:
        given = (change,) if change.startswith("kernel:") else ()
        ctx = Context(data.schema, data, Options(step_range=pp.STEP_RANGE, what_if=given))
        for metric in (steps.METRIC, critical_path.METRIC, what_if.METRIC):
            ctx.results[metric.id] = metric.run(ctx)
        cp, wi = ctx.results["critical_path"], ctx.results["what_if"]
        assert isinstance(cp, MetricResult) and isinstance(wi, MetricResult)
        return cp.data, {r["change"]: r for r in wi.data["rows"]}
    finally:
        data.close()


@pytest.mark.parametrize("name", sorted(pp.PAIRS))
def test_what_if_predicts_the_pair(name: str, tmp_path: Path) -> None:
    change = pp.PAIRS[name]
    with_path, without_path = tmp_path / "with.sqlite", tmp_path / "without.sqlite"
    pp.generate(name, True, with_path, steps=STEPS)
    pp.generate(name, False, without_path, steps=STEPS)
    cp1, rows1 = _run(with_path, change)
    cp2, rows2 = _run(without_path, change)
    for cp in (cp1, cp2):
        assert cp["steps_replayed"] == STEPS and cp["replay_error_pct"]["median"] <= 2.0
    predicted = rows1[change]["predicted_step_ns"]
    measured = rows2[change]["measured_step_ns"]
    assert abs(predicted - measured) <= 0.10 * measured, (predicted, measured)
    # The bottleneck is real: the planted trace is at least 10% slower than its pair.
    assert rows1[change]["measured_step_ns"] >= 1.10 * measured
