"""Numbers and units as Nsight Compute writes them in CSV exports.

Values: `12,532,580,352` (thousands separators), `161,177.21`, `4.0e-05`, `n/a` or an empty
cell (no value), text (`cudaFuncCachePreferNone`, `(256, 1, 1)`: no number).

Units: the base unit (`byte`, `second`, `cycle`, `inst`, `hz` ...) with an optional SI or
binary prefix, per part of a ratio: `usecond`, `us`, `Mbyte`, `Gbyte/s`, `Kibyte`,
`cycle/second`, `cycle/usecond`, `Ghz`, `register/thread`, `%`. `scale` turns a value into
the canonical unit: seconds for time, bytes, cycle/second for frequencies (`hz` is
cycle/second), the rest as counted. ncu's auto-scaled units are decimal (a `Kbyte` is 1,000
bytes); `Kibyte` is 1,024. An unknown unit keeps its value unscaled, under its own name.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?$")
_PLAIN = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
NO_VALUE = frozenset({"", "n/a", "N/A", "-", "nan", "NaN", "inf", "-inf"})

# Base units, as written after the prefix (compared without case) -> canonical name.
_BASES = {
    "byte": "byte", "bytes": "byte", "b": "byte",
    "second": "second", "seconds": "second", "sec": "second", "s": "second",
    "hz": "cycle/second",
    "cycle": "cycle", "cycles": "cycle",
    "inst": "inst", "instruction": "inst", "instructions": "inst",
    "warp": "warp", "warps": "warp", "block": "block", "blocks": "block",
    "thread": "thread", "threads": "thread", "register": "register", "registers": "register",
    "sector": "sector", "request": "request", "wavefront": "wavefront", "cluster": "cluster",
    "op": "op", "ops": "op", "flop": "flop", "transaction": "transaction", "pass": "pass",
}
_PREFIXES = {
    "": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4,
    "m": 1e-3, "u": 1e-6, "\u00b5": 1e-6, "n": 1e-9, "p": 1e-12,
}
_PART = re.compile(r"^(Ki|Mi|Gi|Ti|[KkMGTPmu\u00b5np])?([A-Za-z]+)$")


def number(text: str) -> float | None:
    """The value of a cell, or None for n/a, an empty cell or text that is no number."""
    s = text.strip()
    if s in NO_VALUE:
        return None
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    elif not _PLAIN.match(s):
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _part(text: str) -> tuple[float, str] | None:
    t = text.strip()
    base = _BASES.get(t.lower())
    if base is not None:
        return 1.0, base
    m = _PART.match(t)
    if m is None:
        return None
    base = _BASES.get(m.group(2).lower())
    if base is None:
        return None
    return _PREFIXES[m.group(1) or ""], base


@lru_cache(maxsize=512)
def scale(unit: str) -> tuple[float, str]:
    """(factor, canonical unit) so that value x factor is in the canonical unit.

    `%` stays `%`; an empty unit is a plain count; a unit this module does not know keeps
    factor 1 and its own name."""
    u = unit.strip()
    if u in ("", "%"):
        return 1.0, u
    if u.lower() in ("percent", "pct"):
        return 1.0, "%"
    parts = u.split("/")
    if len(parts) > 3:
        return 1.0, u
    first = _part(parts[0])
    if first is None:
        return 1.0, u
    factor, names = first[0], [first[1]]
    for p in parts[1:]:
        found = _part(p)
        if found is None:
            return 1.0, u
        factor /= found[0]
        names.append(found[1])
    return factor, "/".join(names)


def in_unit(value: float | None, unit: str, want: str) -> float | None:
    """`value` (in `unit`) converted to the canonical unit `want`, or None when the unit is
    not of that kind."""
    if value is None:
        return None
    factor, name = scale(unit)
    return value * factor if name == want else None


__all__ = ["NO_VALUE", "in_unit", "number", "scale"]
