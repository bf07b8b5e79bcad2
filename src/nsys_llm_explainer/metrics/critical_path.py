"""critical_path: the dependency graph of each step, its critical path, and the replay check.

The graph (nsys_llm_explainer/graph/) links each launching thread's CUDA calls in order,
each task to its launch call, each stream's work in order, blocking calls to the work they
wait for, and streams to each other where the trace records event waits. Replaying it with
the measured durations gives every step's time back (the error says how well); following
each step's binding edges back from its end gives its critical path, reported by kind (host
work by named range or operator, launch overhead, kernels by category, copies,
synchronization, communication, GPU queue gaps, unexplained waits) and by item.

Steps are the steps metric's (a trace without steps is replayed whole, one block per
process). On large traces an evenly spaced sample of steps is replayed (graph/steps.py).
The analysis is kept for the what_if metric, which replays the same graph with changes.
"""

from __future__ import annotations

from nsys_llm_explainer.analysis.context import NO_KERNELS
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.graph import analyze as A
from nsys_llm_explainer.graph import path as C
from nsys_llm_explainer.metrics.base import Context, Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.run import CriticalPath


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    if len(ctx.data.runtime()) == 0:
        return METRIC.skipped("the CUDA API table is empty, so no task can be linked to its launch call")
    try:
        res, pieces, cats, info = A.trace_analysis(ctx)
    except UsageError as exc:
        return METRIC.skipped(f"the kernel category file cannot be used ({exc.message})")
    if len(res.measured) == 0:
        return METRIC.skipped("no step could be replayed")
    summary = A.critical_path(res, pieces, cats, info)
    notes = summary.notes
    comm = pieces.kind == C.KINDS.index("communication")
    if comm.any() and not (pieces.label[comm] == C.PEER_WAIT).any():
        notes = (*notes, "communication on the critical path includes the wait for the other ranks, which this "
                 "capture cannot separate from the transfer (the fleet view measures it across rank captures)")
    labels = A.task_labels(ctx.data, ctx.options.kernel_categories)(res.graph)
    lines = A.timeline(res, pieces, labels, ctx.data.runtime_api_names())
    tables = (Table("critical_path_steps", A.STEP_COLUMNS, summary.steps),
              Table("critical_path_items", A.ITEM_COLUMNS, summary.items),
              Table("critical_path_timeline", A.TIMELINE_COLUMNS, lines))
    result: CriticalPath = summary.result
    return MetricResult(METRIC.id, result.to_json(), tables, notes, typed=result)


METRIC = Metric(
    id="critical_path",
    # right after steps: it reads its steps and the caches steps holds
    order=150,
    title="Critical path",
    run=run,
    tables={"critical_path_steps": A.STEP_COLUMNS, "critical_path_items": A.ITEM_COLUMNS,
            "critical_path_timeline": A.TIMELINE_COLUMNS},
    description="Per-step dependency graph, replay check, and the critical path by kind and item.",
    after=("steps",),
    reads=(
        "runtime", "kernel_launch_index", "kernel_attribution", "kernel_categories:",
        "graph_analysis", "graph_calls:", "graph_calls_by_correlation", "graph_peer_waits", "graph_slow_rank",
    ),
)
