"""Launches from the tables of every file: one launch per profiled kernel launch, its values
joined across files.

ncu numbers the launches of one report 0, 1, 2 ... (`ID`). Exports of the same report (the
details page, one CSV per section, the raw page) repeat that ID with the same process id
and kernel name, so records with equal (ID, Process ID, Kernel Name) are one launch, and
their values are joined, unless they contradict each other: an identity cell both state
differently (grid, block, device, stream, time stamp) or a value both hold that differs by
more than SAME_VALUE_TOLERANCE (auto-scaled units round to four digits). Then they are two
launches (two runs of the same program can give a process the same id in a container).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nsys_llm_explainer.ncu.csvfile import Key, Record, RuleRow, Table, Value, number, scale

SAME_VALUE_TOLERANCE = 0.01  # relative
_COMPARED = ("Kernel Time", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC")


@dataclass(frozen=True)
class Launch:
    """One profiled kernel launch, as its exports state it."""

    id: int  # ncu's ID within its report
    pid: int | None
    kernel: str  # the kernel name as ncu printed it (demangled, mangled or its short name)
    identity: Mapping[str, str]  # the identity cells (Device, CC, Grid Size ...), as written
    values: Mapping[Key, Value]
    rules: tuple[RuleRow, ...]
    files: tuple[str, ...]  # the files that hold it
    layouts: tuple[str, ...]

    def get(self, key: Key) -> Value | None:
        return self.values.get(key)

    def field(self, name: str) -> str | None:
        v = self.identity.get(name, "")
        return v or None

    @property
    def device(self) -> int | None:
        d = self.field("Device")
        return int(d) if d is not None and d.isdigit() else None

    @property
    def device_name(self) -> str | None:
        v = self.values.get(("", "", "device__attribute_display_name"))
        name = (v.text if v is not None else "") or self.identity.get("Device Name", "")
        return name.strip() or None


def _same(a: Value, b: Value) -> bool:
    if a.text == b.text and a.unit == b.unit:
        return True
    x, y = number(a.text), number(b.text)
    if x is None or y is None:
        return a.text == b.text
    fa, ua = scale(a.unit)
    fb, ub = scale(b.unit)
    if ua != ub:
        return True  # different quantities under one name: not comparable, not a conflict
    x, y = x * fa, y * fb
    return abs(x - y) <= SAME_VALUE_TOLERANCE * max(abs(x), abs(y))


class _Open:
    def __init__(self, rec: Record, table: Table) -> None:
        self.identity = dict(rec.identity)
        self.values = dict(rec.values)
        self.rules = list(rec.rules)
        self.files = [table.path]
        self.layouts = [table.layout]

    def fits(self, rec: Record) -> bool:
        for name in _COMPARED:
            a, b = self.identity.get(name, ""), rec.identity.get(name, "")
            if a and b and a != b:
                return False
        return all(_same(self.values[k], v) for k, v in rec.values.items() if k in self.values)

    def join(self, rec: Record, table: Table) -> None:
        for name, cell in rec.identity.items():
            if cell and not self.identity.get(name):
                self.identity[name] = cell
        for k, v in rec.values.items():
            self.values.setdefault(k, v)
        seen = {(r.section, r.name, r.text) for r in self.rules}
        self.rules.extend(r for r in rec.rules if (r.section, r.name, r.text) not in seen)
        if table.path not in self.files:
            self.files.append(table.path)
        if table.layout not in self.layouts:
            self.layouts.append(table.layout)


def _int(text: str) -> int | None:
    t = text.strip()
    return int(t) if t.isdigit() else None


def join(tables: Sequence[Table]) -> list[Launch]:
    """The launches of all tables, in the order they first appear."""
    opened: list[_Open] = []
    by_key: dict[tuple[str, str, str], list[_Open]] = {}
    for table in tables:
        for key, rec in table.records.items():
            fit = next((o for o in by_key.get(key, []) if table.path not in o.files and o.fits(rec)), None)
            if fit is None:
                fit = _Open(rec, table)
                opened.append(fit)
                by_key.setdefault(key, []).append(fit)
            else:
                fit.join(rec, table)
    out = []
    for o in opened:
        out.append(Launch(
            id=int(o.identity.get("ID", "0") or 0),
            pid=_int(o.identity.get("Process ID", "")),
            kernel=o.identity.get("Kernel Name", ""),
            identity=o.identity,
            values=o.values,
            rules=tuple(o.rules),
            files=tuple(o.files),
            layouts=tuple(o.layouts),
        ))
    return out


__all__ = ["Launch", "join"]
