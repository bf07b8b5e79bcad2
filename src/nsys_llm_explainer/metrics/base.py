"""The metric interface. A metric is data plus one function:

    METRIC = Metric(id="top_kernels", title="Top kernels", tables={...}, run=run)

`run(ctx)` returns a MetricResult (JSON-ready `data` + CSV tables) or a Skipped(reason).
Raising Unavailable(reason) inside `run` is the same as returning Skipped(reason).
`ctx` (analysis/context.py) holds the trace data, the options and earlier results.
`reads` names the cached tables and intermediates it reads (the runner frees them after their
last reader).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import Outcome, Skipped
from nsys_llm_explainer.options import Options


@frozen
class Metric:
    id: str
    title: str
    run: Callable[[Context], Outcome]
    tables: dict[str, tuple[str, ...]] = field(default_factory=dict)  # csv stem -> columns
    description: str = ""
    after: tuple[str, ...] = ()  # metrics whose results this one reads (ctx.result): run first
    # The TraceData cache keys (data.cached) it reads, directly or through a helper; a trailing
    # ":" stands for every key with that prefix. Each key is released once all its readers have
    # finished (runtime/lifetimes.py); a reader left out costs the time of building it again.
    reads: tuple[str, ...] = ()
    # An option the metric needs (an Options.extra key): without it the metric does not run
    # and is absent from the report (no section, no tables, no "not measured" line).
    option: str | None = None
    # Its place among the metrics: report.json and report.md list them by it, and they run in
    # that order (after the metrics it reads). Spaced by ten, so that a new one fits between two.
    order: int = 0
    # Run right after this metric instead of at its place (metrics.in_run_order), so that the
    # large intermediates they share are released sooner (runtime/lifetimes.py).
    run_after: str | None = None
    # Why the metric would skip, asked once the metrics in skip_after (some of `after`) have
    # run: a reason is its outcome (Skipped), and it does not run. Only a check `run` makes
    # first, and cheap: it lets a metric placed late release what it reads early on a trace
    # it does not apply to (runtime/runner.py). None, or an exception: the metric runs.
    skip_when: Callable[[Context], str | None] | None = None
    skip_after: tuple[str, ...] = ()

    def wanted(self, options: Options) -> bool:
        return self.option is None or bool(options.extra.get(self.option))

    def skipped(self, reason: str) -> Skipped:
        return Skipped(self.id, reason)
