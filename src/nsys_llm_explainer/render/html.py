"""report.html: one self-contained page (inline CSS, inline SVG plots, a few lines of JS to
sort tables). A Content-Security-Policy forbids every network fetch, so the page opens the
same from a CI artifact, an e-mail attachment or an air-gapped machine.

Reading order: the diagnosis (verdict, summary, key numbers, primary evidence, workload,
capture), the findings (a list linking to each finding, each finding linking to the
sections with its evidence), where each GPU's time went with the timeline, then the metric
sections grouped by question (render/overview.py). Metric sections are the same prose and
tables as report.md (render/sections.py, turned into HTML by render/md_html.py).

Jinja autoescaping is on: every value from the trace is escaped; only the SVG markup (built
by render/svg with its own escaping), converted sections (md_html escapes every character
it does not build markup from) and the stylesheet pass through as Markup.
"""

from __future__ import annotations

import functools
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup

from nsys_llm_explainer import fmt
from nsys_llm_explainer.model import Report, TraceFormat
from nsys_llm_explainer.render import md_html, overview, rich, templates
from nsys_llm_explainer.render import sections as sections_mod
from nsys_llm_explainer.render.shared import Shared, shared_for
from nsys_llm_explainer.render.svg import Missing, Plot
from nsys_llm_explainer.render.svg.base import STYLE

if TYPE_CHECKING:
    from nsys_llm_explainer.kernels.labels import Labels

EXTENSION = ".html"
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
ROOT = "report.html.j2"
TIMELINE = "timeline"  # the plot shown with the per-device time table, not in its section


@jinja2.pass_context
def _rich(ctx: jinja2.runtime.Context, text: object) -> Markup:
    """Rule or diagnosis text: its code spans as <code>, the rest escaped (render/rich.py)."""
    return rich.html(text, ctx.get("tainted") or frozenset())


def _nvtx_name(name: object, limit: int = 80) -> str:
    """A range name as report.md's `nvtx` filter shows it: normalized, shortened."""
    from nsys_llm_explainer.analysis.nvtx import normalize
    from nsys_llm_explainer.render.escape import shorten

    return shorten(normalize(str(name)), limit)


def _th(text: object) -> Markup:
    """Plain header text that wraps only at its spaces (md_html.words)."""
    from html import escape

    return Markup(md_html.words([(w, escape(w, quote=True)) for w in str(text).split(" ") if w]))


def _finalize(value: Any) -> Any:
    """A missing value reads "n/a", as in report.md (never Python's None)."""
    return "n/a" if value is None else value


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """report.html's environment, one per process (templates compiled once; render/templates.py)."""
    return templates.environment(
        templates.REPORT_HTML,
        {
            "dur": fmt.dur,
            "pct": fmt.pct,
            "num": fmt.num,
            "size": fmt.size,
            "basename": lambda p: PurePath(str(p)).name,
            "rich": _rich,
            "th": _th,
        },
        overview.template_globals(),
        autoescape=True,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def prepare() -> None:
    """Compile (or load from the cache) the templates report.html renders."""
    env = environment()
    templates.warm(env, templates.REPORT_HTML.for_root(ROOT, templates.names(env)))


def _metric_of(title: str) -> str:
    from nsys_llm_explainer.render.svg import PLOTS

    return next((p.metric_id for p in PLOTS if p.title == title), "")


def _figure(p: Plot) -> dict[str, Any]:
    return {"plot": p, "svg": Markup(p.svg(standalone=False))}


def _groups(
    labels: Labels, built: list[sections_mod.Section], plots: list[Plot], missing: list[Missing]
) -> list[dict[str, Any]]:
    from nsys_llm_explainer.render.svg import PLOTS

    metric_of = {p.title: p.metric_id for p in PLOTS}
    figures: dict[str, list[dict[str, Any]]] = {}
    for p in plots:
        if p.id != TIMELINE:
            figures.setdefault(metric_of.get(p.title, ""), []).append(_figure(p))
    gone: dict[str, list[Missing]] = {}
    for m in missing:
        if metric_of.get(m.title) != TIMELINE:
            gone.setdefault(metric_of.get(m.title, ""), []).append(m)
    views = {
        s.metric_id: {
            "id": s.metric_id,
            "title": s.title,
            "status": s.status,
            "reason": s.reason,
            "html": md_html.convert(s.body, s.kernels, labels) if s.status == "ok" else Markup(""),
            "figures": figures.get(s.metric_id, []),
            "missing": gone.get(s.metric_id, []),
        }
        for s in built
    }
    return [
        {"id": g.id, "title": g.title, "sections": [views[m] for m in ids]}
        for g, ids in overview.groups(list(views))
    ]


def _findings(doc: dict[str, Any], titles: dict[str, str]) -> list[dict[str, Any]]:
    """Every finding with its anchor and evidence links; `top`: one of the first screen's
    findings (time at stake, overview.split_findings), shown open."""
    top, _ = overview.split_findings(doc)
    out = []
    for i, f in enumerate(doc.get("findings", []), start=1):
        links = [(f"m-{mid}", titles[mid]) for mid in f.get("metric_ids", []) if mid in titles]
        out.append({"f": f, "anchor": f"finding-{i}", "links": links, "top": any(f is t for t in top)})
    return out


def render(
    report: Report,
    built: tuple[list[Plot], list[Missing]] | None = None,
    sections: list[sections_mod.Section] | None = None,
    shared: Shared | None = None,
) -> str:
    """`built`: the plots and why the others are missing, and `sections`: the metric sections,
    when the caller has them already (else the shared ones)."""
    shared = shared_for(report, shared)
    doc = shared.document
    plots, missing = built if built is not None else shared.plots
    parts = sections if sections is not None else shared.sections
    titles = {s.metric_id: s.title for s in parts}
    timeline = next((_figure(p) for p in plots if p.id == TIMELINE), None)
    devices = doc["diagnosis"].get("devices") or []
    top, rest = overview.split_findings(doc)
    return (
        environment()
        .get_template(ROOT)
        .render(
            report=doc,
            kineto=report.trace.format is TraceFormat.KINETO,
            diagnosis=doc["diagnosis"],
            key_numbers=overview.key_numbers(doc),
            device_table=overview.device_table(devices),
            findings=_findings(doc, titles),
            timeline=timeline,
            timeline_missing=[m for m in missing if _metric_of(m.title) == TIMELINE],
            groups=_groups(shared.labels, parts, plots, missing),
            svg_style=Markup(STYLE),
            csp=CSP,
            tainted=shared.tainted,
            workload=overview.workload_items(doc),
            kernel_label=shared.labels,
            nvtx_name=_nvtx_name,
        )
    )
