"""Run the registered metrics over one TraceData, one after another.

Metrics share TraceData's cache (built once, see TraceData.cached) and its connection (see
deadline.limit). A metric sees the results of the metrics it names in Metric.after, which
run before it, and no others. Cached keys are released once all their readers have finished
(lifetimes.py), so a large trace's tables and intermediates do not all live to the end.

The metrics once ran in threads; measured A/B on the 2-core machine that bought nothing
(docs/performance.md), so they run in this thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.metrics import Metric
from nsys_llm_explainer.model import Outcome
from nsys_llm_explainer.runtime import alloc
from nsys_llm_explainer.runtime.lifetimes import Releases

RunOne = Callable[[Metric, Context], Outcome]


def run_metrics(metrics: Sequence[Metric], ctx: Context, run_one: RunOne) -> dict[str, Outcome]:
    """metric id -> outcome, in the order of `metrics`. `run_one` must not raise
    Exception (it turns failures into Skipped); anything else it raises is raised here.
    A metric listed in another's `after` must come before it in `metrics`."""
    ids = [m.id for m in metrics]
    for metric in metrics:
        early = [d for d in metric.after if d in ids and ids.index(d) > ids.index(metric.id)]
        if early:
            raise ValueError(f"{metric.id} reads {early}, which run after it")
    releases = Releases(ids)
    results: dict[str, Outcome] = {}
    for metric in metrics:
        results[metric.id] = run_one(metric, _view(ctx, metric, results))
        released = releases.finished(metric.id)
        if released:
            ctx.data.release(*released)
            alloc.release_free_memory()
    return results


def _view(ctx: Context, metric: Metric, results: dict[str, Outcome]) -> Context:
    """`ctx` with only the results `metric` declared (all of them finished)."""
    return dataclasses.replace(ctx, results={d: results[d] for d in metric.after if d in results})
