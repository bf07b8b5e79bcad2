"""The Jinja environment of every Markdown output: report.md and its metric sections,
diff.md, ncu.md.

Every `{{ value }}` is Markdown-escaped by default (finalize), so a kernel or range name
cannot break a table or inject HTML; filters that format numbers return Markup and pass
through untouched. Rule and diagnosis text goes through `rich`: its own `code spans` stay
code, the rest is escaped (render/rich.py). Kernel names go through the `kernel` filter (the
report's labels, kernels/labels.py), or become marks that the caller resolves later (the
metric sections, render/sections.py: MARK, mark); NVTX names through `name` (shortened) or
`nvtx` (normalized, then shortened).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

import jinja2
from markupsafe import Markup

from nsys_llm_explainer import fmt
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.render import escape, overview, rich, templates
from nsys_llm_explainer.render.json_writer import more

# A kernel name as a mark (U+E000 index U+E001) into a list of full names: the metric
# sections are rendered once, and report.md and report.html each put their own label there.
MARK = re.compile("\ue000(\\d+)\ue001")


def mark(refs: list[str], name: object) -> str:
    refs.append("" if name is None else str(name))
    return f"\ue000{len(refs) - 1}\ue001"


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
        return Markup(mark(refs, name))
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
