"""Metric sections, rendered once from templates/metrics/<id>.md.j2 for both report.md and
report.html: prose and tables with units, the same words in both files.

A section is rendered to Markdown in which every kernel name is a mark (U+E000 index U+E001)
into the section's list of full names: report.md puts the escaped label there
(to_markdown), report.html the label with the full name as its tooltip (html.convert). The marks
cannot be forged: escape.md drops those two characters from every name of the trace.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import MetricResult, Report
from nsys_llm_explainer.render import escape
from nsys_llm_explainer.render.templates import MARK, report_environment

if TYPE_CHECKING:
    from nsys_llm_explainer.render.report_types import ReportDoc


@frozen
class Section:
    metric_id: str
    title: str
    status: str  # "ok" or "skipped"
    reason: str  # why it was skipped
    body: str  # Markdown with kernel marks ("" when skipped)
    kernels: tuple[str, ...] = ()  # full kernel names, by mark index


def _body(env: Any, metric_id: str, doc: ReportDoc, top_n: int) -> tuple[str, tuple[str, ...]]:
    """One metric's section; a template that fails on unusual data loses only that section."""
    refs: list[str] = []
    try:
        template = env.get_template(f"metrics/{metric_id}.md.j2")
        text = template.render(m=doc["metrics"].get(metric_id), top_n=top_n, report=doc, kernel_refs=refs)
        return text, tuple(refs)
    except Exception as exc:  # noqa: BLE001 - the rest of the report must still be written
        if os.environ.get("NSYS_LLM_EXPLAIN_DEBUG"):
            raise
        what = escape.md(type(exc).__name__)
        return (
            f"_Not shown, because this section could not be rendered ({what}); "
            "the numbers are in report.json. Please report it._\n"
        ), ()


def render(report: Report, doc: ReportDoc) -> list[Section]:
    """Every metric of the report, in registry order (`doc`: its report.json dict)."""
    env = report_environment()
    top_n = n if isinstance(n := report.options.get("top_n"), int) else 20
    out = []
    for metric in REGISTRY:
        outcome = report.metrics.get(metric.id)
        if outcome is None:
            continue
        if isinstance(outcome, MetricResult):
            body, kernels = _body(env, metric.id, doc, top_n)
            out.append(Section(metric.id, metric.title, "ok", "", body, kernels))
        else:
            out.append(Section(metric.id, metric.title, "skipped", outcome.reason, ""))
    return out


def to_markdown(section: Section, labels: Any) -> str:
    """The section's Markdown with each kernel mark replaced by the kernel's escaped label."""
    if not section.kernels:
        return section.body
    return MARK.sub(lambda m: escape.md(labels(section.kernels[int(m.group(1))])), section.body)


__all__ = ["Section", "render", "to_markdown"]
