"""report.md: GitHub-flavoured Markdown rendered from Jinja templates.

Every `{{ value }}` is Markdown-escaped by default (finalize), so a kernel or range name
cannot break a table or inject HTML; filters that format numbers return Markup and pass
through untouched. Kernel names go through the `kernel` filter (the report's labels,
labels.py); NVTX names through `name` (shortened) or `nvtx` (normalized, then shortened).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import jinja2
from markupsafe import Markup

from nsys_llm_explainer.analysis.nvtx_names import normalize
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import MetricResult, Report
from nsys_llm_explainer.render import escape, fmt
from nsys_llm_explainer.render.summary import more
from nsys_llm_explainer.render.templates import bytecode_cache, loader

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
    """A kernel name as its label (the report's labels, passed as `kernel_labels`)."""
    return Markup(escape.md(ctx["kernel_labels"](name)))


def _nvtx(name: object, limit: int = 80) -> Markup:
    return Markup(escape.md_name(normalize(str(name)), limit))


def environment() -> jinja2.Environment:
    """A new environment with the report's filters (compiled templates are cached on disk,
    render/templates.py); report.md renders with one shared per process (shared())."""
    env = jinja2.Environment(
        loader=loader(),
        bytecode_cache=bytecode_cache("md"),
        autoescape=False,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        name=_safe(escape.md_name),
        kernel=_kernel,
        nvtx=_nvtx,
        md=_safe(escape.md),
        ms=_safe(fmt.ms),
        us=_safe(fmt.us),
        dur=_safe(fmt.dur),
        pct=_safe(fmt.pct),
        num=_safe(fmt.num),
        size=_safe(fmt.size),
    )
    env.globals["more"] = more
    return env


@functools.lru_cache(maxsize=1)
def shared() -> jinja2.Environment:
    """The environment report.md renders with: each template compiled once per process."""
    return environment()


def _section(env: jinja2.Environment, metric_id: str, doc: dict[str, Any], top_n: int, labels: Any) -> str:
    """One metric's section; a template that fails on unusual data loses only that section."""
    try:
        template = env.get_template(f"metrics/{metric_id}.md.j2")
        return template.render(m=doc["metrics"][metric_id], top_n=top_n, report=doc, kernel_labels=labels)
    except Exception as exc:  # noqa: BLE001 - the rest of the report must still be written
        if os.environ.get("NSYS_LLM_EXPLAIN_DEBUG"):
            raise
        what = escape.md(type(exc).__name__)
        return (
            f"_Not shown, because this section could not be rendered ({what}); "
            "the numbers are in report.json. Please report it._\n"
        )


def render(report: Report, plots: Sequence[tuple[str, str]] = ()) -> str:
    """`plots`: (title, relative path) of the SVG files written beside report.md."""
    env = shared()
    doc = report.document
    labels = report.kernel_labels
    sections = []
    for metric in REGISTRY:
        outcome = report.metrics.get(metric.id)
        if outcome is None:
            continue
        body = ""
        if isinstance(outcome, MetricResult):
            body = _section(env, metric.id, doc, report.options.get("top_n", 20), labels)
        sections.append(
            {
                "id": metric.id,
                "title": metric.title,
                "outcome": doc["metrics"][metric.id],
                "body": Markup(body),
            }
        )
    return env.get_template("report.md.j2").render(
        report=doc, sections=sections, plots=list(plots), kernel_labels=labels
    )
