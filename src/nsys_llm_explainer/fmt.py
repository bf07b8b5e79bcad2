"""Number formatting shared by templates and rule text (times are integer nanoseconds
everywhere). The bottom of the layer stack: it imports nothing of the project.

Durations: dur() picks the unit (ns, µs, ms, s: the largest that keeps the number at least 1)
and writes three significant digits (921 ms, 20.6 s, 70.9 µs, 4.75 ms; integer digits are
never rounded away: 1,234 s): the figures of a sentence, the verdict, the key numbers and the
findings. A table column of mostly short times uses one unit for all its rows with fixed
decimals, us() or ms(), keeping full precision; a value reaching HAND_OVER of that unit
(10,000 µs, 10,000 ms) is written in the next unit up with fixed decimals (421.287 ms,
9.774 s), never as "421,287.3 µs".
Microseconds are written "µs". sig() writes any other figure (GB/s, TFLOPS) the same way;
percentages keep one decimal (4.3%) below 100% and none from there (100%); sizes three significant digits (47.5 GiB).
"""

from __future__ import annotations

import math

HAND_OVER = 10_000  # of the column's unit: from here on a value is written by dur()
DIGITS = 3  # significant digits of dur(), sig() and size()
MICRO = "\u00b5s"  # µs
_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, MICRO))


def sig(value: object, digits: int = DIGITS) -> str:
    """`value` with `digits` significant digits and thousands separators; integer digits are
    never rounded away (1,234.5 is 1,235)."""
    if value is None:
        return "n/a"
    v = float(value)  # type: ignore[arg-type]
    if not math.isfinite(v):
        return str(v)
    a = abs(v)
    if a == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(a)))
    text = f"{v:,.{decimals}f}"
    if decimals and abs(float(text.replace(",", ""))) >= 10 ** (digits - decimals):
        text = f"{v:,.{decimals - 1}f}"  # 9.996 rounds to 10.00: one decimal less
    return text


def _fixed(ns: float) -> str:
    """Full precision in the unit that reads best: seconds or milliseconds with three decimals,
    microseconds with one (a table column's hand-over)."""
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:,.3f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    return f"{ns / 1e3:,.1f} {MICRO}"


def ms(ns: object) -> str:
    """Milliseconds with three decimals; from 10 s on, seconds."""
    if ns is None:
        return "n/a"
    v = float(ns)  # type: ignore[arg-type]
    if abs(v) >= HAND_OVER * 1e6:
        return _fixed(v)
    return f"{v / 1e6:,.3f} ms"


def us(ns: object) -> str:
    """Microseconds with one decimal; from 10 ms on, milliseconds or seconds."""
    if ns is None:
        return "n/a"
    v = float(ns)  # type: ignore[arg-type]
    if abs(v) >= HAND_OVER * 1e3:
        return _fixed(v)
    return f"{v / 1e3:,.1f} {MICRO}"


def dur(ns: object) -> str:
    """A duration in the unit that reads best, with three significant digits."""
    if ns is None:
        return "n/a"
    v = float(ns)  # type: ignore[arg-type]
    for scale, unit in _UNITS:
        # 999.96 µs rounds to 1,000 µs: written in the next unit up, 1.00 ms
        if abs(v) >= scale * (1 - 0.5 * 10 ** -DIGITS):
            return f"{sig(v / scale)} {unit}"
    return f"{v:,.0f} ns"


def pct(value: object) -> str:
    """One decimal (4.3%, 95.0%), none from 100% on (100%, 152%): three significant digits
    where the decimal would make a fourth."""
    if value is None:
        return "n/a"
    v = float(value)  # type: ignore[arg-type]
    if abs(v) >= 99.95:
        return f"{v:,.0f}%"
    return f"{v:.1f}%"


def num(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


def size(nbytes: object) -> str:
    """Bytes in the binary unit that reads best, three significant digits (47.5 GiB)."""
    if nbytes is None:
        return "n/a"
    v = float(nbytes)  # type: ignore[arg-type]
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1023.5 or unit == "TiB":
            return f"{v:,.0f} {unit}" if unit == "B" else f"{sig(v)} {unit}"
        v /= 1024
    return f"{v} B"


def listed(values: object) -> str:
    """A list of words as text, "a, b" (an empty or missing item as "-"), not JSON."""
    if values is None:
        return "n/a"
    if not isinstance(values, list | tuple):
        return str(values)
    return ", ".join(str(v) if v not in (None, "") else "-" for v in values)
