"""what_if: the step time and captured window predicted for one change at a time, by
replaying the critical_path metric's graph with the change applied (graph/changes.py):
host work removed, launches as CUDA graphs, copies off the critical path, asynchronous
read-backs, unneeded synchronizations removed, communication overlapped, and each
--what-if "kernel:SELECTOR=Kx" given.

Each row: change, measured_step_ns and predicted_step_ns (medians over the replayed
steps), measured_window_ns and predicted_window_ns (the whole capture), the gains, the
spread of the predicted step (p10, p90) and how many graph nodes the change touched (0:
nothing in the trace to change).
"""

from __future__ import annotations

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.graph import analyze as A
from nsys_llm_explainer.graph import changes as ch
from nsys_llm_explainer.metrics.base import Context, Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.run import WhatIf


def run(ctx: Context) -> Outcome:
    cp = ctx.results.get("critical_path")
    if cp is None or cp.status != "ok":
        reason = getattr(cp, "reason", "the critical path was not measured")
        return METRIC.skipped(reason)
    try:
        res = A.trace_analysis(ctx)[0]
    except UsageError as exc:
        return METRIC.skipped(exc.message)
    given = frozenset(ch.parse(t).key for t in ctx.options.what_if)
    result: WhatIf
    result, frame = A.what_if(res, given)
    return MetricResult(METRIC.id, result.to_json(), (Table("what_if", A.WHAT_IF_COLUMNS, frame),), typed=result)


METRIC = Metric(
    id="what_if",
    order=160,
    title="What-if replay",
    run=run,
    tables={"what_if": A.WHAT_IF_COLUMNS},
    description="Predicted step time and window for each change, by replaying the step graph.",
    after=("critical_path",),
    reads=("graph_analysis",),
)
