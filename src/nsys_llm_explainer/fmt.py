"""Number formatting shared by templates and rule text (times are integer nanoseconds
everywhere).

Durations: dur() picks the unit (ns, us, ms, s: the largest that keeps the number at least
1). A table column of mostly short times uses one unit for all its rows, us() or ms(), but a
value reaching HAND_OVER of that unit (10,000 us, 10,000 ms) is written as dur() writes it
(ms, s), never as "421,287.3 us": the same value reads the same everywhere beyond that.
Microseconds are written "us" (ASCII, so that the reports grep and diff alike).
"""

from __future__ import annotations

HAND_OVER = 10_000  # of the column's unit: from here on a value is written by dur()


def ms(ns: object) -> str:
    """Milliseconds with three decimals; from 10 s on, seconds (dur)."""
    if ns is None:
        return "n/a"
    v = float(ns)  # type: ignore[arg-type]
    if abs(v) >= HAND_OVER * 1e6:
        return dur(v)
    return f"{v / 1e6:,.3f} ms"


def us(ns: object) -> str:
    """Microseconds with one decimal; from 10 ms on, milliseconds or seconds (dur)."""
    if ns is None:
        return "n/a"
    v = float(ns)  # type: ignore[arg-type]
    if abs(v) >= HAND_OVER * 1e3:
        return dur(v)
    return f"{v / 1e3:,.1f} us"


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


def listed(values: object) -> str:
    """A list of words as text, "a, b" (an empty or missing item as "-"), not JSON."""
    if values is None:
        return "n/a"
    if not isinstance(values, list | tuple):
        return str(values)
    return ", ".join(str(v) if v not in (None, "") else "-" for v in values)
