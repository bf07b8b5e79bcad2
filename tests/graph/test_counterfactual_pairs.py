"""Counterfactual pairs (tests/fixtures/counterfactual_pairs.py): a program captured as it ran
and captured again with the fix made, by an event simulator that shares nothing with the
replay, in both trace formats. The what-if row of the change that makes the fix, computed on
the first capture, predicts the window measured on the second within 10%; the same change
on the second capture, which holds little or nothing of what it removes, predicts its own
window within NULL_PCT; the unchanged replay gives each capture's steps back within 2%."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsys_llm_explainer.metrics import Context, critical_path, steps, what_if
from nsys_llm_explainer.model import MetricResult
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.trace import formats
from tests.fixtures import counterfactual_pairs as cp
from tests.fixtures.counterfactual import STEP_RANGE

TOLERANCE_PCT = 10.0
NULL_PCT = 3.0  # the fixed capture still holds a little of what some changes remove (jitter)


def rows(path: Path, change: str, fmt: str) -> tuple[dict, dict]:
    data = formats.open_trace(path, jobs=1)
    try:
        given = (change,) if change.startswith("kernel:") else ()
        ctx = Context(data.schema, data, Options(step_range=STEP_RANGE if fmt == "nsys" else None, what_if=given))
        for metric in (steps.METRIC, critical_path.METRIC, what_if.METRIC):
            ctx.results[metric.id] = metric.run(ctx)
        cpr, wi = ctx.results["critical_path"], ctx.results["what_if"]
        assert isinstance(cpr, MetricResult) and isinstance(wi, MetricResult)
        return cpr.data, {r["change"]: r for r in wi.data["rows"]}
    finally:
        data.close()


CASES = [(name, None) for name in sorted(cp.CHANGES)] + [("gpu_bound", 64), ("gpu_bound", 4096)]


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
@pytest.mark.parametrize(("name", "depth"), CASES)
def test_the_fix_is_predicted(name: str, depth: int | None, fmt: str, tmp_path: Path) -> None:
    p = cp.pair(name, seed=1, depth=depth)
    captured, fixed = cp.write(p, tmp_path, fmt)
    cp1, rows1 = rows(captured, p.change, fmt)
    cp2, rows2 = rows(fixed, p.change, fmt)
    for c in (cp1, cp2):
        assert c["steps_total"] == 12 * len(p.captured.ranks) and c["replay_error_pct"]["max"] <= 2.0
    measured = rows2[p.change]["measured_window_ns"]
    predicted = rows1[p.change]["predicted_window_ns"]
    assert abs(predicted - measured) <= TOLERANCE_PCT / 100 * measured, (predicted, measured)
    # the fix is real: the capture with the problem is at least 10% longer
    assert rows1[p.change]["measured_window_ns"] >= 1.10 * measured
    if name != "gpu_bound":  # GEMMs twice as fast again is a real change on the fixed capture
        null = rows2[p.change]["predicted_window_ns"]
        assert abs(null - measured) <= NULL_PCT / 100 * measured, (null, measured)
    # Calls found waiting for room in a full launch queue did wait in the simulator; in the
    # GPU-bound program most of its waits are found, and the queue's depth with them.
    counts = cp1["graph"]["counts"]
    blocked = sum(c.blocked for c in p.captured.calls)
    assert counts["queue_waits"] <= blocked
    if name == "gpu_bound":
        assert counts["queue_waits"] >= 0.5 * blocked > 0
        assert abs(counts["queue_depth"] - p.depth) <= max(2, 0.02 * p.depth)


def test_the_simulator_keeps_its_queue_bounded() -> None:
    """The simulator's own rule, checked on its output: when a launch call starts, at most
    `depth` operations issued before it are unfinished, and the host does fill the queue."""
    p = cp.pair("gpu_bound", seed=1, depth=96)
    ops = {o.corr: o for o in p.captured.ops}
    calls = sorted((c for c in p.captured.calls if c.corr in ops), key=lambda c: c.start)
    ends = sorted(ops[c.corr].end for c in calls)
    import bisect

    most = 0
    for n, c in enumerate(calls):
        issued = sorted(ops[x.corr].end for x in calls[:n])
        pending = len(issued) - bisect.bisect_right(issued, c.end)
        most = max(most, pending)
        assert pending <= p.depth
    assert most >= p.depth - 2 and len(ends) == len(calls) and any(c.blocked for c in calls)
