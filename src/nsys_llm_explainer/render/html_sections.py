"""Metric sections of report.html, built generically from each metric's report.json data.

A metric's data is scalars (shown as facts), objects of scalars (facts under a heading),
and lists of records (tables, first `top_n` rows). Values are formatted by their key's
unit suffix (_ns durations, _pct percentages, bytes sizes), so metrics added later show up
without a template of their own. Kernel names show as the report's labels (labels.py) and
NVTX range names normalized, each with the full name as the cell's tooltip. Cells are plain
text; the template escapes them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nsys_llm_explainer.analysis.nvtx_names import normalize
from nsys_llm_explainer.render import fmt
from nsys_llm_explainer.render.escape import shorten
from nsys_llm_explainer.render.summary import KEY as LEFT_OUT

MAX_CELL = 90  # characters of a cell shown; the full text is in the cell's tooltip
MAX_INLINE_LIST = 12
SKIP_KEYS = ("status", "notes", "reason", LEFT_OUT)
NVTX_KEYS = ("nvtx_range",)  # record keys holding a raw NVTX range name
KERNEL_SEP = " → "


@dataclass(frozen=True)
class Cell:
    text: str
    full: str = ""  # tooltip when the text was shortened
    sort: float | None = None  # numeric sort key for the table sorter


@dataclass(frozen=True)
class Names:
    """How a metric's records name kernels: list key -> record key (labels.KERNEL_FIELDS),
    and the report's labels."""

    fields: dict[str, str] = field(default_factory=dict)
    label: Callable[[object], str] = str

    def cell(self, value: Any) -> Cell:
        if isinstance(value, list):
            names = [str(v) for v in value]
            return Cell(KERNEL_SEP.join(self.label(n) for n in names), KERNEL_SEP.join(names))
        if isinstance(value, str):
            return Cell(self.label(value), value)
        return cell("", value)


@dataclass
class Block:
    kind: str  # "facts" or "table"
    title: str = ""
    facts: list[tuple[str, Cell]] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)
    total_rows: int = 0
    csv: str = ""  # where every row is, when report.json holds only some


def label(key: str) -> str:
    """A column or fact name: unit suffix dropped (values carry units), underscores spaced."""
    for suffix, repl in (("_ns", ""), ("_pct", " %"), ("_bytes", "")):
        if key.endswith(suffix) and len(key) > len(suffix):
            key = key[: -len(suffix)] + repl
            break
    return key.replace("_", " ")


def cell(key: str, value: Any) -> Cell:
    if value is None:
        return Cell("n/a")
    if isinstance(value, bool):
        return Cell("yes" if value else "no")
    if isinstance(value, int | float):
        return Cell(_number(key, value), sort=float(value))
    if isinstance(value, list):
        if key == "modes" and all(isinstance(v, dict) and "p50_ns" in v for v in value):
            # Duration modes (analysis/modes.py) read best inline, as report.md shows them.
            return _text(" / ".join(
                f"{fmt.dur(m['p50_ns'])} ({float(m.get('pct_of_calls', 0)):.0f}%)" for m in value
            ))
        if value and all(isinstance(v, dict) for v in value):
            return Cell(f"{len(value):,} entries (see report.json)")
        if len(value) > MAX_INLINE_LIST:
            return Cell(f"{len(value):,} values (see report.json)")
        return _text(", ".join(cell(key, v).text for v in value))
    if isinstance(value, dict):
        return _text("; ".join(f"{label(k)}: {cell(k, v).text}" for k, v in value.items()))
    return _text(str(value))


def _number(key: str, value: float) -> str:
    if key.endswith("_ns") or key.endswith("_ns_per_step"):
        return fmt.dur(value)
    if key.endswith("_pct") or key.startswith("pct_"):
        return fmt.pct(value)
    if key.endswith("bytes"):
        return fmt.size(value)
    if isinstance(value, float):
        return f"{value:,.4g}"
    return fmt.num(value)


def _text(s: str) -> Cell:
    short = shorten(s, MAX_CELL)
    return Cell(short, s if short != s else "")


def _nvtx(value: Any) -> Cell:
    if not isinstance(value, str):
        return cell("", value)
    short = shorten(normalize(value), MAX_CELL)
    return Cell(short, value if short != value else "")


def blocks(
    data: dict[str, Any], top_n: int, title: str = "", depth: int = 0, names: Names | None = None
) -> list[Block]:
    """Facts first, then one table per list of records, then nested objects (two levels)."""
    names = names or Names()
    left_out = data.get(LEFT_OUT) or {}
    facts = Block("facts", title)
    tables: list[Block] = []
    nested: list[Block] = []
    for key, value in data.items():
        if key in SKIP_KEYS:
            continue
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            table = _table(
                label(key) if not title else f"{title}: {label(key)}", value, top_n,
                names.fields.get(key) if depth == 0 else None, names,
            )
            if depth == 0 and key in left_out:
                table.total_rows += int(left_out[key]["rows"])
                table.csv = str(left_out[key]["csv"])
            tables.append(table)
        elif (
            isinstance(value, dict)
            and depth < 1
            and any(isinstance(v, list | dict) for v in value.values())
        ):
            nested += blocks(value, top_n, label(key), depth + 1, Names(label=names.label))
        else:
            facts.facts.append((label(key), cell(key, value)))
    return ([facts] if facts.facts else []) + tables + nested


def _table(
    title: str, records: list[dict[str, Any]], top_n: int, kernel_key: str | None, names: Names
) -> Block:
    keys = list(dict.fromkeys(k for r in records[:top_n] for k in r))

    def show(k: str, v: Any) -> Cell:
        if k == kernel_key:
            return names.cell(v)
        return _nvtx(v) if k in NVTX_KEYS else cell(k, v)

    rows = [[show(k, r.get(k)) for k in keys] for r in records[:top_n]]
    return Block(
        "table", title, headers=[label(k) for k in keys], rows=rows, total_rows=len(records)
    )
