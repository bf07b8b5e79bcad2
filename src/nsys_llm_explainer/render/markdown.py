"""report.md: GitHub-flavoured Markdown rendered from Jinja templates.

Every `{{ value }}` is Markdown-escaped by default (finalize), so a kernel or range name
cannot break a table or inject HTML; filters that format numbers return Markup and pass
through untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jinja2
from markupsafe import Markup

from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import MetricResult, Report
from nsys_llm_explainer.render import escape, fmt
from nsys_llm_explainer.render.json_writer import report_dict

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


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nsys_llm_explainer", "templates"),
        autoescape=False,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        name=_safe(escape.md_name),
        md=_safe(escape.md),
        ms=_safe(fmt.ms),
        us=_safe(fmt.us),
        dur=_safe(fmt.dur),
        pct=_safe(fmt.pct),
        num=_safe(fmt.num),
        size=_safe(fmt.size),
    )
    return env


def render(report: Report) -> str:
    env = environment()
    doc = report_dict(report)
    sections = []
    for metric in REGISTRY:
        outcome = report.metrics.get(metric.id)
        if outcome is None:
            continue
        body = ""
        if isinstance(outcome, MetricResult):
            template = env.get_template(f"metrics/{metric.id}.md.j2")
            body = template.render(m=doc["metrics"][metric.id], top_n=report.options.get("top_n", 20), report=doc)
        sections.append({"id": metric.id, "title": metric.title, "outcome": doc["metrics"][metric.id], "body": Markup(body)})
    return env.get_template("report.md.j2").render(report=doc, sections=sections)
