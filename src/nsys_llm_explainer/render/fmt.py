"""Number formatting shared by templates (times are integer nanoseconds everywhere)."""

from __future__ import annotations


def ms(ns: object) -> str:
    if ns is None:
        return "n/a"
    return f"{float(ns) / 1e6:,.3f} ms"  # type: ignore[arg-type]


def us(ns: object) -> str:
    if ns is None:
        return "n/a"
    return f"{float(ns) / 1e3:,.1f} us"  # type: ignore[arg-type]


def dur(ns: object) -> str:
    """Pick a readable unit."""
    if ns is None:
        return "n/a"
    v = float(ns)  # type: ignore[arg-type]
    if abs(v) >= 1e9:
        return f"{v / 1e9:,.3f} s"
    if abs(v) >= 1e6:
        return f"{v / 1e6:,.3f} ms"
    if abs(v) >= 1e3:
        return f"{v / 1e3:,.1f} us"
    return f"{v:,.0f} ns"


def pct(value: object) -> str:
    if value is None:
        return "n/a"
    return f"{float(value):.1f}%"  # type: ignore[arg-type]


def num(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def size(nbytes: object) -> str:
    if nbytes is None:
        return "n/a"
    v = float(nbytes)  # type: ignore[arg-type]
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{v:,.1f} {unit}"
        v /= 1024
    return f"{v} B"
