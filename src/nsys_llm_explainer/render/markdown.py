"""report.md: GitHub-flavoured Markdown rendered from Jinja templates.

Two layouts (`mode`):
- compact (the default, for pull requests): the verdict, its summary and the key numbers,
  the top findings with their evidence, then closed `<details>` blocks grouped by question
  (render/overview.py GROUPS) holding the rest: more findings, the diagnosis, the metric
  sections with their plots, capture facts, coverage and limitations.
- full: everything open, the diagnosis first, then findings, plots and every metric section.

Every `{{ value }}` is Markdown-escaped by default (finalize), so a kernel or range name
cannot break a table or inject HTML; filters that format numbers return Markup and pass
through untouched. Rule and diagnosis text goes through `rich`: its own `code spans` stay
code, the rest is escaped (render/rich.py). Kernel names go through the `kernel` filter (the
report's labels, kernels/labels.py); NVTX names through `name` (shortened) or `nvtx` (normalized,
then shortened). Metric sections are rendered by render/sections.py, shared with report.html.
"""

from __future__ import annotations

import fnmatch
import functools
import html
from collections.abc import Callable, Sequence
from pathlib import PurePath
from typing import Any

import jinja2
from markupsafe import Markup

from nsys_llm_explainer import fmt
from nsys_llm_explainer.analysis.nvtx_names import normalize
from nsys_llm_explainer.model import Report, TraceFormat
from nsys_llm_explainer.render import MD_LAYOUTS, escape, overview, rich, templates
from nsys_llm_explainer.render import sections as sections_mod
from nsys_llm_explainer.render.shared import Shared, shared_for
from nsys_llm_explainer.render.summary import more

EXTENSION = ".md"


def _safe(func: Callable[..., str]) -> Callable[..., Markup]:
    def wrapper(*args: Any, **kwargs: Any) -> Markup:
        return Markup(func(*args, **kwargs))

    return wrapper


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup):
        return value
    if value is None:
        return "n/a"
    if isinstance(value, bool | int | float):
        return value
    return escape.md(value)


@jinja2.pass_context
def _kernel(ctx: jinja2.runtime.Context, name: object) -> Markup:
    """A kernel name as its label (the report's labels, passed as `kernel_labels`), or as a
    mark into `kernel_refs` when the caller resolves names later (render/sections.py)."""
    refs = ctx.get("kernel_refs")
    if refs is not None:
        return Markup(sections_mod.mark(refs, name))
    return Markup(escape.md(ctx["kernel_labels"](name)))


@jinja2.pass_context
def _rich(ctx: jinja2.runtime.Context, text: object, table: bool = False) -> Markup:
    """Rule or diagnosis text: its code spans kept, the rest escaped (render/rich.py)."""
    return Markup(rich.md(text, ctx.get("tainted") or frozenset(), table))


def _nvtx(name: object, limit: int = 80) -> Markup:
    return Markup(escape.md_name(normalize(str(name)), limit))


def filters() -> dict[str, Callable[..., Any]]:
    """The filters of every Markdown environment (report.md's, diff.md's)."""
    return {
        "name": _safe(escape.md_name),
        "kernel": _kernel,
        "nvtx": _nvtx,
        "md": _safe(escape.md),
        "ms": _safe(fmt.ms),
        "us": _safe(fmt.us),
        "dur": _safe(fmt.dur),
        "pct": _safe(fmt.pct),
        "num": _safe(fmt.num),
        "size": _safe(fmt.size),
        "rich": _rich,
        "listed": _safe(lambda v: escape.md(fmt.listed(v))),
        "h": lambda v: Markup(html.escape(escape.strip_controls(v), quote=True)),
        "basename": lambda p: PurePath(str(p)).name,
    }


def environment(
    family: templates.Family = templates.REPORT_MD, extra_filters: dict[str, Callable[..., Any]] | None = None
) -> jinja2.Environment:
    """A new Markdown environment for `family` (report.md's, or diff.md's with its
    `extra_filters`), every filter set before anything is compiled (render/templates.py);
    report.md renders with one per process (report_environment())."""
    globals_ = {
        **overview.template_globals(),
        "more": more,
        "since_first_kernel": overview.since_first_kernel,
        "workload_items": overview.workload_items,
        "bin_counts": overview.bin_counts,
    }
    return templates.environment(
        family,
        {**filters(), **(extra_filters or {})},
        globals_,
        autoescape=False,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


@functools.lru_cache(maxsize=1)
def report_environment() -> jinja2.Environment:
    """The environment report.md renders with: each template compiled once per process."""
    return environment()


MODES = MD_LAYOUTS
LAYOUTS = {"compact": "report.md.j2", "full": "report_full.md.j2"}  # mode -> the template it renders
SECTIONS = "metrics/*.md.j2"  # the metric sections (render/sections.py), in report.md and report.html


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
    missing: Sequence[Any] = (),
    shared: Shared | None = None,
) -> str:
    """`plots`: (title, relative path) of the SVG files written beside report.md; `missing`:
    the plots not drawn (svg.Missing); `sections`: sections.render(report) when the caller has
    it already (report.html uses the same)."""
    if mode not in MODES:
        raise ValueError(f"unknown report.md layout {mode!r} (choose from {', '.join(MODES)})")
    shared = shared_for(report, shared)
    env = report_environment()
    doc = shared.document
    labels = shared.labels
    built = sections_mod.render(report, shared) if sections is None else sections
    plot_metric = _plot_metrics()
    by_metric: dict[str, list[tuple[str, str]]] = {}
    for title, path in plots:
        by_metric.setdefault(plot_metric.get(title, ""), []).append((title, path))
    missing_by: dict[str, list[Any]] = {}
    for m in missing:
        missing_by.setdefault(plot_metric.get(m.title, ""), []).append(m)
    views: dict[str, dict[str, Any]] = {
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
    groups = []
    for g, ids in overview.groups(list(views)):
        titles = [str(views[m]["title"]) for m in ids]
        if g.id == "capture":
            titles.append("the trace, coverage and limitations")
        groups.append({"id": g.id, "title": g.title, "about": overview.about(g, titles) or g.title,
                       "sections": [views[m] for m in ids]})
    return env.get_template(LAYOUTS[mode]).render(
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
    )


@functools.lru_cache(maxsize=1)
def _plot_metrics() -> dict[str, str]:
    """Plot title -> the metric whose section shows it."""
    from nsys_llm_explainer.render.svg import PLOTS

    return {p.title: p.metric_id for p in PLOTS}
