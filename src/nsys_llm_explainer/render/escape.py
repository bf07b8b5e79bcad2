"""Escaping for names that come from the trace (untrusted): they must not break a Markdown
table, inject HTML or links, or forge a heading."""

from __future__ import annotations

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


def shorten(text: object, limit: int = 80) -> str:
    """Keep the head and tail of long C++ names (the middle is template noise)."""
    s = " ".join(str(text).split())
    if len(s) <= limit:
        return s
    head = (limit - 3) * 2 // 3
    tail = limit - 3 - head
    return s[:head] + "..." + s[-tail:]


def md_name(text: object, limit: int = 80) -> str:
    return md(shorten(text, limit))
