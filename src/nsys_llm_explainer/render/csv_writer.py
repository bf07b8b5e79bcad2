"""tables/*.csv: every table a metric declares, with a header row even when empty or skipped."""

from __future__ import annotations

from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import MetricResult, Report, Table

EXTENSION = ".csv"


def tables(report: Report) -> dict[str, Table]:
    """csv stem -> table, for every declared table of every registered metric."""
    out: dict[str, Table] = {}
    for metric in REGISTRY:
        outcome = report.metrics.get(metric.id)
        produced = {t.name: t for t in outcome.tables} if isinstance(outcome, MetricResult) else {}
        for stem, columns in metric.tables.items():
            out[stem] = produced.get(stem, Table(stem, columns))
    return out


def render_table(table: Table) -> str:
    text: str = table.rows().to_csv(index=False, lineterminator="\n")
    return text


def render(report: Report) -> dict[str, str]:
    return {f"{stem}.csv": render_table(t) for stem, t in tables(report).items()}
