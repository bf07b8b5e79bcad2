"""Writers for a diff: diff.md (Jinja, escaped like report.md), diff.html, diff.json,
tables/diff_kernels.csv, and the one-line verdict printed on stdout.

diff.html: one self-contained page like report.html (its stylesheet and sortable tables,
no network access when viewed): the headline and the gate verdict first, in a card marked
when the captures are not comparable, then every section of diff.md (converted by
render/html.py's convert(), which escapes everything it does not build markup from)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any, TypedDict

import jinja2
from markupsafe import Markup

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diff.comparability import interval, pct
from nsys_llm_explainer.diff.compare import Diff, DiffDoc, labels_of
from nsys_llm_explainer.diff.in_step import ChangeRow, IntervalNoise
from nsys_llm_explainer.diff.kernels import COLUMNS as KERNEL_COLUMNS
from nsys_llm_explainer.diff.kernels import NAME_SEP, KernelRow
from nsys_llm_explainer.diff.totals import TotalRow
from nsys_llm_explainer.kernels.labels import Labels
from nsys_llm_explainer.model import Table
from nsys_llm_explainer.render import escape, templates
from nsys_llm_explainer.render.csv_writer import render_table
from nsys_llm_explainer.render.html import CSP, convert

MD_NAME = "diff.md"
MD_TEMPLATE = "diff.md.j2"
HTML_NAME = "diff.html"
JSON_NAME = "diff.json"
CSV_NAME = "tables/diff_kernels.csv"


def signed_pct(value: float | None) -> str:
    if value is None:
        return "n/a"
    v = float(value)
    return "new" if math.isinf(v) else f"{v:+.1f}%"


def signed_dur(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    v = float(ns)
    return ("+" if v > 0 else "-" if v < 0 else "\u00b1") + fmt.dur(abs(v))


def value(v: float | None, unit: str) -> str:
    """A headline value in its unit (counts may be fractional once normalized)."""
    if v is None:
        return "n/a"
    if unit == "ns":
        return fmt.dur(v)
    if unit == "fraction":
        return fmt.pct(100.0 * float(v))
    f = float(v)
    return fmt.num(int(f)) if f.is_integer() else f"{f:,.2f}"


def change(row: TotalRow) -> str:
    if row["delta"] is None:
        return "n/a"
    if row["unit"] == "fraction":
        return f"{100.0 * row['delta']:+.1f} pp"
    if row["unit"] == "ns":
        diff = signed_dur(row["delta"])
    else:
        d = float(row["delta"])
        diff = f"{d:+,.0f}" if d.is_integer() else f"{d:+,.2f}"
    pct = "new" if row["delta_pct"] is None and row["delta"] else signed_pct(row["delta_pct"])
    return f"{diff} ({pct})"


def _ci(v: float | None, lo: float | None, hi: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{pct(v)} ({interval(lo, hi)})"


def ci(row: ChangeRow | IntervalNoise) -> str:
    """`+30.0% (95% CI +29.0% to +30.4%)` from a change row's change_pct/low_pct/high_pct."""
    return _ci(row.get("change_pct"), row.get("low_pct"), row.get("high_pct"))


def per_call_ci(row: KernelRow) -> str:
    """The same from a kernel row's per_call_pct/per_call_low_pct/per_call_high_pct."""
    return _ci(row.get("per_call_pct"), row.get("per_call_low_pct"), row.get("per_call_high_pct"))


def check_value(v: object) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return fmt.pct(100.0 * v) + " of kernel time in shared names"
    return str(v)


def kernel_labels(diff: Diff) -> Labels:
    """Labels over the kernel names of both sides, so no two rows of diff.md look alike."""
    return labels_of(diff.doc["kernels"])


@jinja2.pass_context
def _kernels(ctx: jinja2.runtime.Context, v: object) -> Markup:
    """A row's kernel name(s) as labels (the diff's labels, passed as `kernel_labels`)."""
    labels = ctx["kernel_labels"]
    return Markup(escape.md(NAME_SEP.join(labels(n) for n in str(v).split(NAME_SEP))))


FILTERS: dict[str, Callable[..., Any]] = {
    "spct": lambda v: Markup(signed_pct(v)),
    "sdur": lambda v: Markup(signed_dur(v)),
    "value": lambda v, unit: Markup(value(v, unit)),
    "change": lambda r: Markup(change(r)),
    "gatev": lambda v: Markup("n/a" if v is None else gate_value(v)),
    "ci": lambda r: Markup(escape.md(ci(r))),
    "kci": lambda r: Markup(escape.md(per_call_ci(r))),
    "checkvalue": lambda v: Markup(escape.md(check_value(v))),
    "kernels": _kernels,
}


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """diff.md's environment: report.md's filters and the diff's own (render/templates.py)."""
    return templates.markdown_environment(templates.DIFF_MD, FILTERS)


def render_md(diff: Diff, top_n: int = 20) -> str:
    return environment().get_template(MD_TEMPLATE).render(
        d=diff.doc, top_n=top_n, verdict=verdict(diff), kernel_labels=kernel_labels(diff)
    )


def render_json(diff: Diff) -> str:
    return json.dumps(diff.doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def render_csv(diff: Diff) -> str:
    return render_table(Table("diff_kernels", KERNEL_COLUMNS, diff.kernel_rows))


def files(diff: Diff, top_n: int = 20) -> dict[str, str]:
    # diff.json last: output.write moves files in this order, so a complete diff.json
    # means the rest of this diff is on disk too
    md = render_md(diff, top_n)
    return {
        MD_NAME: md,
        HTML_NAME: render_html(diff, md),
        CSV_NAME: render_csv(diff),
        JSON_NAME: render_json(diff),
    }


def _summary(doc: DiffDoc) -> str:
    f = doc["findings"]
    text = doc["headline"]["text"].rstrip(".")
    return f"{text}; {len(f['appeared'])} new / {len(f['disappeared'])} resolved findings"


def verdict(diff: Diff) -> str:
    """One line: FAIL with the tripped conditions (or a gate on captures that are not
    comparable, or one that checked nothing), PASS, or DIFF when no gate was given; then the
    headline."""
    doc = diff.doc
    summary = _summary(doc)
    gate = doc["gate"]
    conds = gate["conditions"]
    tripped = [c for c in conds if c["status"] == "tripped"]
    unknown = [c["expression"] for c in conds if c["status"] == "not_evaluated"]
    tail = f"; not evaluated: {', '.join(unknown)}" if unknown else ""
    why = ", ".join(f"{c['expression']} (value {gate_value(c['value'])})" for c in tripped)
    refused = ("not comparable, so no gate passes (--allow-incomparable evaluates its conditions anyway)"
               if gate.get("incomparable") and any(c["metric"] != "incomparable" for c in conds) else "")
    if tripped:
        return f"FAIL: {why}{'; ' + refused if refused else ''}; {summary}{tail}"
    if refused:
        return f"FAIL: {refused}; {summary}{tail}"
    if gate.get("unevaluated"):
        if gate.get("tripped"):
            return (f"FAIL: none of the {len(conds)} --fail-on conditions could be evaluated "
                    f"(--allow-unevaluated lets this pass); {summary}{tail}")
        return f"PASS: no condition could be evaluated (--allow-unevaluated); {summary}{tail}"
    if conds:
        checked = f"{len(conds) - len(unknown)} of {len(conds)} conditions checked"
        allowed = " on captures that are not comparable (--allow-incomparable)" if gate.get(
            "incomparable_reasons") else ""
        return f"PASS: {checked}, none tripped{allowed}; {summary}{tail}"
    return f"DIFF: {summary} (no --fail-on given)"


def gate_value(v: object) -> str:
    return v if isinstance(v, str) else f"{float(v):.2f}"  # type: ignore[arg-type]


TEMPLATE = "diff.html.j2"


@functools.lru_cache(maxsize=1)
def html_environment() -> jinja2.Environment:
    """diff.html's environment (render/templates.py): autoescaped, no filters of its own."""
    return templates.environment(
        templates.DIFF_HTML, {}, autoescape=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


class HtmlSection(TypedDict):
    title: str
    html: Markup


def sections(md: str) -> list[HtmlSection]:
    """diff.md's `## ` sections (title, HTML body), without its first line and top heading."""
    out: list[HtmlSection] = []
    title: str | None = None
    body: list[str] = []
    for line in md.splitlines()[1:]:
        if line.startswith("## "):
            if title is not None:
                out.append({"title": title, "html": convert("\n".join(body))})
            title, body = line[3:].strip(), []
        elif title is not None:
            body.append(line)
        elif not line.startswith("# "):
            body.append(line)
    if title is not None:
        out.append({"title": title, "html": convert("\n".join(body))})
    return out


def intro(md: str) -> Markup:
    """The side-by-side table and verdict before the first section."""
    lines = [ln for ln in md.splitlines()[1:] if not ln.startswith("# ")]
    head = []
    for ln in lines:
        if ln.startswith("## "):
            break
        head.append(ln)
    return convert("\n".join(head))


def render_html(diff: Diff, md: str) -> str:

    doc = diff.doc
    return html_environment().get_template(TEMPLATE).render(
        d=doc, csp=CSP, verdict=verdict(diff), intro=intro(md), sections=sections(md),
    )
