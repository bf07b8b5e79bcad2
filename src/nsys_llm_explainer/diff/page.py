"""diff.html: one self-contained page like report.html (its stylesheet and sortable tables,
no network access when viewed): the headline and the gate verdict first, in a card marked
when the captures are not comparable, then every section of diff.md (converted by
render/md_html.py, which escapes everything it does not build markup from)."""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from nsys_llm_explainer.diff.compare import Diff
from nsys_llm_explainer.render import md_html, templates
from nsys_llm_explainer.render.html import CSP

TEMPLATE = "diff.html.j2"


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """diff.html's environment (render/templates.py): autoescaped, no filters of its own."""
    return templates.environment(
        templates.DIFF_HTML, {}, autoescape=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def sections(md: str) -> list[dict[str, Any]]:
    """diff.md's `## ` sections (title, HTML body), without its first line and top heading."""
    out: list[dict[str, Any]] = []
    title: str | None = None
    body: list[str] = []
    for line in md.splitlines()[1:]:
        if line.startswith("## "):
            if title is not None:
                out.append({"title": title, "html": md_html.convert("\n".join(body))})
            title, body = line[3:].strip(), []
        elif title is not None:
            body.append(line)
        elif not line.startswith("# "):
            body.append(line)
    if title is not None:
        out.append({"title": title, "html": md_html.convert("\n".join(body))})
    return out


def intro(md: str) -> Any:
    """The side-by-side table and verdict before the first section."""
    lines = [ln for ln in md.splitlines()[1:] if not ln.startswith("# ")]
    head = []
    for ln in lines:
        if ln.startswith("## "):
            break
        head.append(ln)
    return md_html.convert("\n".join(head))


def render(diff: Diff, md: str) -> str:
    from nsys_llm_explainer.diff.render import verdict

    doc = diff.doc
    return environment().get_template(TEMPLATE).render(
        d=doc, csp=CSP, verdict=verdict(diff), intro=intro(md), sections=sections(md),
    )
