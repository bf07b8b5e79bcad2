"""Escaping for names that come from the trace (untrusted): they must not break a Markdown
table, inject HTML or links, or forge a heading."""

from __future__ import annotations

import hashlib
import re

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~])")
# GitHub turns bare URLs into links; a zero-width space after the scheme or "www" stops it.
_AUTOLINK = re.compile(r"(?i)(://|\bwww\.)")
_WS = re.compile(r"[\r\n\t\v\f\u2028\u2029]+")
# Control characters, and the two private-use characters render/sections.py marks kernel
# names with (a name from the trace must not forge such a mark).
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f\x7f\ue000\ue001]")


def strip_controls(text: object) -> str:
    """Line breaks as spaces, control characters dropped: one line of plain text."""
    return _CONTROL.sub("", _WS.sub(" ", str(text)))


def md(text: object) -> str:
    """Inline-safe Markdown text: special characters backslash-escaped, no line breaks."""
    s = strip_controls(text).replace("&", "&amp;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return _AUTOLINK.sub(lambda m: m.group(1)[0] + "\u200b" + m.group(1)[1:], s)


ELLIPSIS = "…"  # the one mark of a cut, as in kernel labels
_WORD_START = re.compile(r"::|[\s_/.,:;(<\[#-]")
_SCOPE = re.compile(r"::|: |/")


def shorten(text: object, limit: int = 80) -> str:
    """Keep the head and tail of long C++ names (the middle is template noise)."""
    s = " ".join(str(text).split())
    if len(s) <= limit:
        return s
    head = (limit - 1) * 2 // 3
    tail = limit - 1 - head
    return s[:head] + ELLIPSIS + (s[-tail:] if tail else "")


def _tail(text: str, limit: int) -> str:
    """A long scoped name by its last component (`autograd::engine::evaluate_function:
    AccumulateGrad` -> `…AccumulateGrad`), which says what it is; else shorten()."""
    if len(text) <= limit:
        return text
    parts = _SCOPE.split(text)
    last = parts[-1].strip() if len(parts) > 1 else ""
    return ELLIPSIS + shorten(last, limit - 1) if last else shorten(text, limit)


def shorten_all(names: list[str], limit: int) -> dict[str, str]:
    """Labels of at most `limit` characters for a set of names shown side by side (plot
    rows), kept apart: a long scoped name by its last component (_tail); names whose labels
    coincide from just before the first character where they differ
    (`KernelExecutor::compileFusion`, `KernelExecutor::runFusion` -> `…compileFusion`,
    `…runFusion`); any still alike get the first hex digits of their SHA-1."""
    flat = {n: " ".join(str(n).split()) for n in names}
    out = {n: _tail(f, limit) for n, f in flat.items()}
    for group in _clashes(out):
        forms = [flat[n] for n in group]
        diffs = [_first_difference(a, b) for a in forms for b in forms if a != b]
        if not diffs:
            continue  # the same text (names differing in blanks only): told apart below
        first = min(diffs)
        # From the start of the word holding the difference (after `::`, `_`, `/`, `.`, a blank).
        bounds = [m.end() for m in _WORD_START.finditer(forms[0], 0, first)]
        start = bounds[-1] if bounds and first - bounds[-1] <= 8 else max(0, first - 4)
        for n in group:
            out[n] = shorten(flat[n], limit) if start == 0 else ELLIPSIS + shorten(flat[n][start:], limit - 1)
    for group in _clashes(out):
        for n in group:
            suffix = " #" + hashlib.sha1(str(n).encode("utf-8", "surrogatepass")).hexdigest()[:4]
            out[n] = shorten(out[n], max(1, limit - len(suffix))) + suffix
    return out


def _clashes(labels: dict[str, str]) -> list[list[str]]:
    by_label: dict[str, list[str]] = {}
    for n, label in labels.items():
        by_label.setdefault(label, []).append(n)
    return [g for g in by_label.values() if len(g) > 1]


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def md_name(text: object, limit: int = 80) -> str:
    return md(shorten(text, limit))
