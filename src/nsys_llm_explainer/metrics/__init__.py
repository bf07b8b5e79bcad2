"""Metric registry, in report order (a metric may read the results of those before it).

A metric is a module of this package that defines METRIC (metrics/base.py): the registry
finds every such module, and METRIC.order gives its place; METRIC.run_after runs a few
right after another metric instead, to free memory sooner."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.metrics.base import Metric

NOT_METRICS = frozenset({"base"})  # modules of this package that define no metric


def _found() -> list[tuple[str, Metric]]:
    """(module name, METRIC) of every metric module, by METRIC.order."""
    found = [(info.name, importlib.import_module(f"{__name__}.{info.name}").METRIC)
             for info in pkgutil.iter_modules(__path__) if info.name not in NOT_METRICS]
    found.sort(key=lambda pair: pair[1].order)
    for (a, ma), (b, mb) in zip(found, found[1:], strict=False):
        if ma.order == mb.order:
            raise ValueError(f"metrics {a} and {b} share the place order={ma.order}")
    return found


_FOUND = _found()
ORDER: tuple[str, ...] = tuple(name for name, _ in _FOUND)  # module names, in report order
REGISTRY: tuple[Metric, ...] = tuple(metric for _, metric in _FOUND)

# Metrics that run right after another instead of in report order: each as soon as what it
# reads is built, so that the large intermediates they share are released earlier
# (runtime/lifetimes.py). The report lists the metrics in REGISTRY order whatever order they ran in.
RUN_AFTER: dict[str, str] = {m.id: m.run_after for m in REGISTRY if m.run_after is not None}


def in_run_order(metrics: Sequence[Metric]) -> list[Metric]:
    """`metrics` (in REGISTRY order) in the order they run (Metric.run_after)."""
    wanted = {m.id for m in metrics}
    followers: dict[str, list[Metric]] = {}
    for m in metrics:
        if m.run_after in wanted:
            followers.setdefault(m.run_after, []).append(m)
    out: list[Metric] = []

    def emit(m: Metric) -> None:
        out.append(m)
        for f in followers.get(m.id, ()):
            emit(f)

    for m in metrics:
        if m.run_after not in wanted:
            emit(m)
    return out


# The metrics of every report: REGISTRY less those that run only when an option asks for them
# (Metric.option: ncu with --ncu).
ALWAYS: tuple[Metric, ...] = tuple(m for m in REGISTRY if m.option is None)

__all__ = ["ALWAYS", "ORDER", "REGISTRY", "RUN_AFTER", "Context", "Metric", "in_run_order"]
