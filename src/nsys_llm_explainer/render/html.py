"""report.html: one self-contained page (inline CSS, inline SVG plots, a few lines of JS to
sort tables). A Content-Security-Policy forbids every network fetch, so the page opens the
same from a CI artifact, an e-mail attachment or an air-gapped machine.

Jinja autoescaping is on: every value from the trace is escaped; only the SVG markup (built
by render/svg with its own escaping) and the stylesheet pass through as Markup.
"""

from __future__ import annotations

import functools
from pathlib import PurePath
from typing import Any

import jinja2
from markupsafe import Markup

from nsys_llm_explainer.labels import KERNEL_FIELDS
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import Report
from nsys_llm_explainer.render import fmt
from nsys_llm_explainer.render.html_sections import Names, blocks
from nsys_llm_explainer.render.svg import Missing, Plot, build_plots
from nsys_llm_explainer.render.svg.base import STYLE
from nsys_llm_explainer.render.templates import bytecode_cache, loader

EXTENSION = ".html"
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """One environment per process (templates compiled once; bytecode cached on disk)."""
    env = jinja2.Environment(
        loader=loader(),
        bytecode_cache=bytecode_cache("html"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(
        dur=fmt.dur,
        pct=fmt.pct,
        num=fmt.num,
        size=fmt.size,
        basename=lambda p: PurePath(str(p)).name,
    )
    return env


def _sections(report: Report, doc: dict[str, Any]) -> list[dict[str, Any]]:
    top_n = int(report.options.get("top_n", 20))
    out = []
    known = {m.id: m.title for m in REGISTRY}
    labels = report.kernel_labels
    for mid, m in doc["metrics"].items():
        names = Names(KERNEL_FIELDS.get(mid, {}), labels)
        out.append(
            {
                "id": mid,
                "title": known.get(mid, mid),
                "outcome": m,
                "blocks": blocks(m, top_n, names=names) if m["status"] == "ok" else [],
            }
        )
    return out


def render(report: Report, built: tuple[list[Plot], list[Missing]] | None = None) -> str:
    """`built`: build_plots(report) when the caller has it already."""
    doc = report.document
    plots, missing = built if built is not None else build_plots(report, doc)
    figures = [{"plot": p, "svg": Markup(p.svg(standalone=False))} for p in plots]
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            report=doc,
            figures=figures,
            missing=missing,
            sections=_sections(report, doc),
            svg_style=Markup(STYLE),
            csp=CSP,
        )
    )
