"""report.md: GitHub-flavoured Markdown rendered from Jinja templates.

Two layouts (`mode`):
- compact (the default, for pull requests): the verdict, its summary and the key numbers,
  the top findings with their evidence, then closed `<details>` blocks grouped by question
  (render/overview.py GROUPS) holding the rest: more findings, the diagnosis, the metric
  sections with their plots, capture facts, coverage and limitations.
- full: everything open, the diagnosis first, then findings, plots and every metric section.

The templates render in the Markdown environment (render/templates.py: every value escaped,
kernel and NVTX names labelled and shortened). Metric sections are rendered by
render/sections.py, shared with report.html.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from markupsafe import Markup

from nsys_llm_explainer.model import Report, TraceFormat
from nsys_llm_explainer.render import MD_LAYOUTS, overview, templates
from nsys_llm_explainer.render import sections as sections_mod
from nsys_llm_explainer.render.output import joined
from nsys_llm_explainer.render.shared import Shared, shared_for
from nsys_llm_explainer.render.templates import report_environment

if TYPE_CHECKING:
    from nsys_llm_explainer.render.svg import Missing

EXTENSION = ".md"
MODES = MD_LAYOUTS
LAYOUTS = {"compact": "report.md.j2", "full": "report_full.md.j2"}  # mode -> the template it renders
SECTIONS = "metrics/*.md.j2"  # the metric sections (render/sections.py), in report.md and report.html


class SectionView(TypedDict):
    """A metric section as report.md's templates show it."""

    id: str
    title: str
    status: str
    reason: str
    body: Markup
    plots: list[tuple[str, str]]  # (title, relative path) of its SVG files
    missing: list[Missing]  # its plots not drawn


class GroupView(TypedDict):
    id: str
    title: str
    about: str
    sections: list[SectionView]


def prepare(mode: str | None) -> None:
    """Compile (or load from the cache) the templates a report renders with report_environment(): the
    metric sections, and with a `mode` report.md in that layout."""
    env = report_environment()
    names = templates.names(env)
    if mode is None:
        names = [n for n in names if fnmatch.fnmatchcase(n, SECTIONS)]
    else:
        names = templates.REPORT_MD.for_root(LAYOUTS[mode], names)
    templates.warm(env, names)


def render(
    report: Report,
    plots: Sequence[tuple[str, str]] = (),
    mode: str = "compact",
    sections: list[sections_mod.Section] | None = None,
    missing: Sequence[Missing] = (),
    shared: Shared | None = None,
) -> str:
    """`plots`: (title, relative path) of the SVG files written beside report.md; `missing`:
    the plots not drawn (svg.Missing); `sections`: the metric sections when the caller has them
    already (report.html uses the same; else the shared ones)."""
    if mode not in MODES:
        raise ValueError(f"unknown report.md layout {mode!r} (choose from {', '.join(MODES)})")
    shared = shared_for(report, shared)
    env = report_environment()
    doc = shared.document
    labels = shared.labels
    built = shared.sections if sections is None else sections
    plot_metric = _plot_metrics()
    by_metric: dict[str, list[tuple[str, str]]] = {}
    for title, path in plots:
        by_metric.setdefault(plot_metric.get(title, ""), []).append((title, path))
    missing_by: dict[str, list[Missing]] = {}
    for m in missing:
        missing_by.setdefault(plot_metric.get(m.title, ""), []).append(m)
    views: dict[str, SectionView] = {
        s.metric_id: {
            "id": s.metric_id,
            "title": s.title,
            "status": s.status,
            "reason": s.reason,
            "body": Markup(sections_mod.to_markdown(s, labels)),
            "plots": by_metric.get(s.metric_id, []) if mode == "compact" else [],
            "missing": missing_by.get(s.metric_id, []),
        }
        for s in built
    }
    top, rest = overview.split_findings(doc)
    groups: list[GroupView] = []
    for g, ids in overview.groups(list(views)):
        titles = [views[m]["title"] for m in ids]
        if g.id == "capture":
            titles.append("the trace, coverage and limitations")
        groups.append({"id": g.id, "title": g.title, "about": overview.about(g, titles) or g.title,
                       "sections": [views[m] for m in ids]})
    return joined(env.get_template(LAYOUTS[mode]).generate(
        report=doc,
        source=report.trace.format.label,
        key_numbers=overview.key_numbers(doc),
        device_table=overview.device_table(doc["diagnosis"].get("devices") or []),
        top_findings=top,
        notes=overview.notes(doc),
        more_findings=rest,
        more_counts=overview.severity_counts(rest),
        open_evidence=overview.OPEN_EVIDENCE,
        groups=groups,
        sections=[views[s.metric_id] for s in built],
        plots=list(plots),
        kineto=report.trace.format is TraceFormat.KINETO,
        kernel_labels=labels,
        tainted=shared.tainted,
    ))


@functools.lru_cache(maxsize=1)
def _plot_metrics() -> dict[str, str]:
    """Plot title -> the metric whose section shows it."""
    from nsys_llm_explainer.render.svg import PLOTS

    return {p.title: p.metric_id for p in PLOTS}
