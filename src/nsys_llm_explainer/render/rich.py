"""Rule and diagnosis text with inline code: `a backtick span` in a recommendation or an
evidence line renders as code (report.md: a code span; report.html: <code>), the rest is
escaped like any other text.

The same text may quote names from the trace (kernel labels, NVTX ranges), which are
untrusted and may hold backticks themselves. A backtick belongs to the trace when the text
around it matches the text around a backtick of one of the report's trace strings (taint()):
such a backtick is escaped, never a code delimiter, and a span that would hold one is not
code. Mistakes can only go one way: a rule's own backtick shown escaped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from html import escape as _html
from typing import Any

from markupsafe import Markup

from nsys_llm_explainer.render import escape

_WS = re.compile(r"[\r\n\t\v\f\u2028\u2029]+")
MIN_CONTEXT = 6  # matched characters around a backtick that tie it to a trace string
MIN_SIDE = 3  # or this many on one side


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def _strings(value: Any, out: set[str]) -> None:
    if isinstance(value, str):
        if "`" in value:
            out.add(value)
    elif isinstance(value, dict):
        for v in value.values():
            if isinstance(v, str):  # here, not by a call: a report can hold a million values
                if "`" in v:
                    out.add(v)
            elif isinstance(v, dict | list | tuple):
                _strings(v, out)
    elif isinstance(value, list | tuple):
        if value and not isinstance(value[0], str | dict | list | tuple):
            return  # a list of numbers (timeline bins): nothing to find
        for v in value:
            _strings(v, out)


def taint(report: Any, labels: Any) -> frozenset[str]:
    """The report's trace strings holding a backtick, with the forms writers and rules show
    them in (kernel label, normalized NVTX name, whitespace collapsed). Usually empty."""
    from nsys_llm_explainer.analysis.nvtx import normalize
    from nsys_llm_explainer.model import MetricResult

    found: set[str] = set()
    for outcome in report.metrics.values():
        if isinstance(outcome, MetricResult):
            _strings(outcome.data, found)
    _strings(report.capture_info, found)
    trace = report.trace
    _strings([trace.path, *(g.name for g in trace.gpus if g.name), *(p.name for p in trace.processes if p.name)],
             found)
    for name, label in labels.items():
        if "`" in name or "`" in label:
            found.update((name, label))
    out = set()
    for s in found:
        for form in (s, _norm(s), normalize(s), labels(s)):
            if "`" in form:
                out.add(form)
    return frozenset(out)


def _run(a: str, i: int, b: str, j: int, step: int) -> int:
    k = 0
    while 0 <= i + step * (k + 1) < len(a) and 0 <= j + step * (k + 1) < len(b):
        if a[i + step * (k + 1)] != b[j + step * (k + 1)]:
            break
        k += 1
    return k


def _owned(text: str, i: int, tainted: Iterable[str]) -> bool:
    """Is the backtick at text[i] part of a trace string?"""
    for t in tainted:
        for j, ch in enumerate(t):
            if ch != "`":
                continue
            left, right = _run(text, i, t, j, -1), _run(text, i, t, j, 1)
            if left + right + 1 >= min(MIN_CONTEXT, len(t)) or max(left, right) >= MIN_SIDE:
                return True
    return False


def spans(text: object, tainted: frozenset[str] = frozenset()) -> Iterator[tuple[str, bool]]:
    """(piece, is_code) in order: code spans are `...` pairs of the text's own backticks."""
    s = _WS.sub(" ", str(text))
    ticks = [i for i, ch in enumerate(s) if ch == "`"]
    if len(ticks) < 2:
        yield s, False
        return
    tainted = frozenset(_WS.sub(" ", t) for t in tainted)  # line breaks read as the text's do
    free = [i for i in ticks if not (tainted and _owned(s, i, tainted))]
    owned = sorted(set(ticks) - set(free))
    pos = 0
    k = 0
    while k + 1 < len(free):
        a, b = free[k], free[k + 1]
        if b == a + 1 or any(a < o < b for o in owned):
            k += 1  # an empty span, or one holding a trace backtick: not code
            continue
        yield s[pos:a], False
        yield s[a + 1 : b], True
        pos = b + 1
        k += 2
    yield s[pos:], False


def md(text: object, tainted: frozenset[str] = frozenset(), table: bool = False) -> str:
    """Inline Markdown: code spans kept, everything else escaped (escape.md)."""
    out = []
    for piece, code in spans(text, tainted):
        if not code:
            out.append(escape.md(piece) if piece else "")
            continue
        body = escape.strip_controls(piece)
        if table:
            body = body.replace("|", "\\|")  # GFM splits cells before reading code spans
        if body.startswith(" ") and body.endswith(" ") and body.strip():
            body = " " + body + " "  # CommonMark strips one space on each side
        out.append(f"`{body}`")
    return "".join(out)


def html(text: object, tainted: frozenset[str] = frozenset()) -> Markup:
    """HTML: code spans as <code>, everything else escaped."""
    out = []
    for piece, code in spans(text, tainted):
        body = _html(escape.strip_controls(piece), quote=True)
        out.append(f"<code>{body}</code>" if code else body)
    return Markup("".join(out))


__all__ = ["html", "md", "spans", "taint"]
