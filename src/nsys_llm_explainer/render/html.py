"""report.html: one self-contained page (inline CSS, inline SVG plots, a few lines of JS to
sort tables). A Content-Security-Policy forbids every network fetch, so the page opens the
same from a CI artifact, an e-mail attachment or an air-gapped machine.

Reading order: the diagnosis (verdict, summary, key numbers, primary evidence, workload,
capture), the findings (a list linking to each finding, each finding linking to the
sections with its evidence), where each GPU's time went with the timeline, then the metric
sections grouped by question (render/overview.py). Metric sections are the same prose and
tables as report.md (render/sections.py, turned into HTML by convert() below).

Jinja autoescaping is on: every value from the trace is escaped; only the SVG markup (built
by render/svg with its own escaping), converted sections (convert() escapes every character
it does not build markup from) and the stylesheet pass through as Markup.

Sections as HTML (convert): the Markdown the report's own templates write, that is
paragraphs, `- ` lists, `####` headings, GFM tables (sortable, numbers right-aligned with a
numeric sort key), and inline code spans, **strong**, _emphasis_ and backslash escapes.

Only that subset: the input is report.md's section text, whose trace names are already
Markdown-escaped (escape.md), so every character that is not one of these constructs is text
and comes out HTML-escaped. Kernel marks (render/sections.py) become the kernel's label with
its full name as a tooltip."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from html import escape as _esc
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, TypedDict

import jinja2
from markupsafe import Markup

from nsys_llm_explainer import fmt
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import Report, TraceFormat
from nsys_llm_explainer.render import overview, rich, templates
from nsys_llm_explainer.render import sections as sections_mod
from nsys_llm_explainer.render.output import joined
from nsys_llm_explainer.render.shared import Shared, shared_for
from nsys_llm_explainer.render.svg import Missing, Plot
from nsys_llm_explainer.render.svg.base import STYLE

if TYPE_CHECKING:
    from nsys_llm_explainer.kernels.labels import Labels
    from nsys_llm_explainer.render.report_types import FindingDoc, ReportDoc

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
    """Plain header text that wraps only at its spaces (words)."""
    from html import escape

    return Markup(words([(w, escape(w, quote=True)) for w in str(text).split(" ") if w]))


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


class Figure(TypedDict):
    plot: Plot
    svg: Markup


class SectionView(TypedDict):
    """A metric section as report.html.j2 shows it."""

    id: str
    title: str
    status: str
    reason: str
    html: Markup
    figures: list[Figure]
    missing: list[Missing]


class GroupView(TypedDict):
    id: str
    title: str
    sections: list[SectionView]


class FindingView(TypedDict):
    f: FindingDoc
    anchor: str
    links: list[tuple[str, str]]  # (anchor, title) of the sections of its metrics
    top: bool  # one of the first screen's findings, shown open


def _figure(p: Plot) -> Figure:
    return {"plot": p, "svg": Markup(p.svg(standalone=False))}


def _groups(
    labels: Labels, built: list[sections_mod.Section], plots: list[Plot], missing: list[Missing]
) -> list[GroupView]:
    from nsys_llm_explainer.render.svg import PLOTS

    metric_of = {p.title: p.metric_id for p in PLOTS}
    figures: dict[str, list[Figure]] = {}
    for p in plots:
        if p.id != TIMELINE:
            figures.setdefault(metric_of.get(p.title, ""), []).append(_figure(p))
    gone: dict[str, list[Missing]] = {}
    for m in missing:
        if metric_of.get(m.title) != TIMELINE:
            gone.setdefault(metric_of.get(m.title, ""), []).append(m)
    views: dict[str, SectionView] = {
        s.metric_id: {
            "id": s.metric_id,
            "title": s.title,
            "status": s.status,
            "reason": s.reason,
            "html": convert(s.body, s.kernels, labels) if s.status == "ok" else Markup(""),
            "figures": figures.get(s.metric_id, []),
            "missing": gone.get(s.metric_id, []),
        }
        for s in built
    }
    return [
        {"id": g.id, "title": g.title, "sections": [views[m] for m in ids]}
        for g, ids in overview.groups(list(views))
    ]


def _findings(doc: ReportDoc, titles: dict[str, str]) -> list[FindingView]:
    """Every finding with its anchor and evidence links; `top`: one of the first screen's
    findings (time at stake, overview.split_findings), shown open."""
    top, _ = overview.split_findings(doc)
    out: list[FindingView] = []
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
    return joined(
        environment()
        .get_template(ROOT)
        .generate(
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


_SEP_ROW = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_MARK = re.compile("\ue000(\\d+)\ue001")
_PUNCT = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
# A number with an optional unit at the start of a cell: its sort key in base units.
_NUMBER = re.compile(r"^\s*([-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+)\s*(ns|us|µs|ms|s|B|KiB|MiB|GiB|TiB|%|x)?(?![\w.])")
_UNIT = {
    "ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9,
    "B": 1.0, "KiB": 1024.0, "MiB": 1024.0**2, "GiB": 1024.0**3, "TiB": 1024.0**4,
}

Label = Callable[[object], str]


@frozen
class _Tok:
    kind: str  # text, html, delim
    value: str
    opens: bool = False
    closes: bool = False


def _esc_text(s: str) -> str:
    return _esc(s.replace("&amp;", "&"), quote=True)


def _tokens(src: str, kernels: Sequence[str], label: Label) -> list[_Tok]:
    out: list[_Tok] = []
    buf: list[str] = []

    def flush() -> None:
        if buf:
            out.append(_Tok("text", "".join(buf)))
            buf.clear()

    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "\\" and i + 1 < n and src[i + 1] in _PUNCT:
            buf.append(src[i + 1])
            i += 2
        elif c == "`":
            run = len(src[i:]) - len(src[i:].lstrip("`"))
            end = src.find("`" * run, i + run)
            while end != -1 and end + run < n and src[end + run] == "`":
                end = src.find("`" * run, end + run + 1)
            if end == -1:
                buf.append("`" * run)
                i += run
                continue
            body = src[i + run : end]
            if body.startswith(" ") and body.endswith(" ") and body.strip():
                body = body[1:-1]
            flush()
            out.append(_Tok("html", f"<code>{_esc(body, quote=True)}</code>"))
            i = end + run
        elif c == "\ue000":
            m = _MARK.match(src, i)
            if m is None:
                i += 1
                continue
            k = int(m.group(1))
            full = kernels[k] if k < len(kernels) else ""
            flush()
            text = _esc(label(full), quote=True)
            out.append(_Tok("html", f'<span class="k" title="{_esc(full, quote=True)}">{text}</span>'))
            i = m.end()
        elif c == "*" and src.startswith("**", i):
            before = src[i - 1] if i else " "
            after = src[i + 2] if i + 2 < n else " "
            flush()
            out.append(_Tok("delim", "**", opens=not after.isspace(), closes=not before.isspace()))
            i += 2
        elif c == "_":
            before = src[i - 1] if i else " "
            after = src[i + 1] if i + 1 < n else " "
            left = before.isspace() or before in _PUNCT
            right = after.isspace() or after in _PUNCT
            if (left and not after.isspace()) or (right and not before.isspace()):
                flush()
                out.append(_Tok("delim", "_", opens=left and not after.isspace(),
                                closes=right and not before.isspace()))
            else:
                buf.append(c)
            i += 1
        else:
            buf.append(c)
            i += 1
    flush()
    return out


def inline(src: str, kernels: Sequence[str] = (), label: Label = str) -> str:
    """One line of the subset as HTML (a string of safe markup)."""
    toks = _tokens(src, kernels, label)
    pair: dict[int, int] = {}
    for a, t in enumerate(toks):
        if t.kind != "delim" or not t.opens or a in pair or a in pair.values():
            continue
        for b in range(a + 1, len(toks)):
            u = toks[b]
            if u.kind == "delim" and u.value == t.value and u.closes and b not in pair.values():
                pair[a] = b
                break
    closing = {b: a for a, b in pair.items()}
    parts = []
    for k, t in enumerate(toks):
        if t.kind == "text":
            parts.append(_esc_text(t.value))
        elif t.kind == "html":
            parts.append(t.value)
        elif k in pair:
            parts.append("<strong>" if t.value == "**" else "<em>")
        elif k in closing:
            parts.append("</strong>" if t.value == "**" else "</em>")
        else:
            parts.append(_esc(t.value))
    return "".join(parts)


def _cells(line: str) -> list[str]:
    s = line.strip()
    cells, buf, i = [], [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            buf.append(s[i : i + 2])
            i += 2
            continue
        if s[i] == "|":
            cells.append("".join(buf))
            buf = []
        else:
            buf.append(s[i])
        i += 1
    cells.append("".join(buf))
    if cells and not cells[0].strip():
        cells = cells[1:]
    if cells and not cells[-1].strip():
        cells = cells[:-1]
    return [c.strip() for c in cells]


def sort_key(text: str) -> float | None:
    """The number a cell starts with, in base units (ns, bytes), for the table sorter."""
    m = _NUMBER.match(text)
    if m is None:
        return None
    value = float(m.group(1).replace(",", ""))
    return value * _UNIT.get(m.group(2) or "", 1.0)


def _plain(src: str) -> str:
    """Cell text without Markdown marks, for its sort key."""
    return re.sub(r"\\(.)", r"\1", src).replace("`", "").replace("**", "")


_BREAKABLE = re.compile(r"[^\w.,%]")  # characters a browser may wrap after or before (- / ( ...)
_SPLIT_UNSAFE = re.compile(r"`|\*\*|(?<!\\)_|\ue000")


def words(html_words: Sequence[tuple[str, str]]) -> str:
    """(plain, html) words joined by spaces, a word that holds a hyphen, slash or bracket kept
    on one line: a column header wraps only at its spaces."""
    return " ".join(f'<span class="nw">{h}</span>' if _BREAKABLE.search(p) else h for p, h in html_words)


def header(src: str, kernels: Sequence[str] = (), label: Label = str) -> str:
    """A table header cell's Markdown as HTML that wraps only at spaces."""
    if _SPLIT_UNSAFE.search(src):
        return inline(src, kernels, label)
    return words([(_plain(w), inline(w, kernels, label)) for w in src.split(" ") if w])


def _table(lines: list[str], kernels: Sequence[str], label: Label) -> str:
    names = _cells(lines[0])
    align = ["n" if c.endswith(":") and not c.startswith(":") else "" for c in _cells(lines[1])]
    heads = []
    for k, h in enumerate(names):
        cls = ' class="n"' if k < len(align) and align[k] else ""
        heads.append(f'<th scope="col"{cls}><button type="button">{header(h, kernels, label)}</button></th>')
    rows = []
    for line in lines[2:]:
        cells = _cells(line)
        tds = []
        for k, c in enumerate(cells):
            num = k < len(align) and align[k]
            key = sort_key(_plain(c)) if num else None
            attrs = (' class="n"' if num else "") + (f' data-v="{key:.15g}"' if key is not None else "")
            tds.append(f"<td{attrs}>{inline(c, kernels, label)}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    return (
        '<div class="scroll"><table class="sortable"><thead><tr>' + "".join(heads)
        + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
    )


def convert(md: str, kernels: Sequence[str] = (), label: Label = str) -> Markup:
    """A section's Markdown (the subset above) as HTML."""
    lines = md.splitlines()
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []

    def end_para() -> None:
        if para:
            out.append("<p>" + inline(" ".join(para), kernels, label) + "</p>")
            para.clear()

    def end_list() -> None:
        if items:
            out.append("<ul>" + "".join(f"<li>{inline(x, kernels, label)}</li>" for x in items) + "</ul>")
            items.clear()

    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        if not line.strip():
            end_para()
            i += 1
            continue
        if line.startswith("|") and i + 1 < len(lines) and _SEP_ROW.match(lines[i + 1].strip()):
            end_para()
            end_list()
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(_table(lines[i:j], kernels, label))
            i = j
            continue
        if line.startswith("- "):
            end_para()
            items.append(line[2:])
            i += 1
            continue
        heading = _HEADING.match(line)
        if heading:
            end_para()
            end_list()
            out.append(f"<h4>{inline(heading.group(2), kernels, label)}</h4>")
            i += 1
            continue
        end_list()
        para.append(line.strip())
        i += 1
    end_para()
    end_list()
    return Markup("\n".join(out))
