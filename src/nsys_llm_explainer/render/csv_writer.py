"""tables/*.csv: every table a metric declares, with a header row even when empty or skipped.

Tables holding kernel names (labels.KERNEL_TABLES) get a `label` column right after the
name: the label report.md, report.html and the plots show for that kernel.

Text cells that a spreadsheet would run as a formula (starting with =, +, -, @, tab or CR;
a kernel or range name comes from someone else's trace) get a leading apostrophe, the
usual CSV-injection guard. Only CSV output does this; report.json keeps the exact names.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.kernels.labels import KERNEL_TABLES, LABEL_COLUMN
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import MetricResult, Report, Table
from nsys_llm_explainer.render.shared import Shared, shared_for

EXTENSION = ".csv"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def tables(report: Report) -> dict[str, Table]:
    """csv stem -> table, for every declared table of every registered metric."""
    out: dict[str, Table] = {}
    for metric in REGISTRY:
        outcome = report.metrics.get(metric.id)
        if outcome is None and metric.option is not None:
            continue  # an optional metric the command line did not ask for
        produced = {t.name: t for t in outcome.tables} if isinstance(outcome, MetricResult) else {}
        for stem, columns in metric.tables.items():
            out[stem] = produced.get(stem, Table(stem, columns))
    return out


def columns(stem: str, declared: tuple[str, ...]) -> tuple[str, ...]:
    """The CSV header of a table: its declared columns, plus `label` after a kernel name."""
    name = KERNEL_TABLES.get(stem)
    if name is None or name not in declared:
        return declared
    at = declared.index(name) + 1
    return (*declared[:at], LABEL_COLUMN, *declared[at:])


def frame(report: Report, stem: str, shared: Shared | None = None) -> pd.DataFrame:
    """The rows of tables/<stem>.csv (before the spreadsheet guard); KeyError when unknown."""
    found = tables(report)
    if stem not in found:
        raise KeyError(f"no table {stem!r}; the tables are: {', '.join(found)}")
    table = found[stem]
    rows = table.rows().reset_index(drop=True)
    header = columns(stem, table.columns)
    if header != table.columns:
        name = KERNEL_TABLES[stem]
        labels = shared_for(report, shared).labels
        rows.insert(header.index(LABEL_COLUMN), LABEL_COLUMN, [labels(n) for n in rows[name]])
    return rows


# Rows whose cells are Python objects at a time (a text or float cell is a string of about
# 60 bytes, an int or bool cell a Python number): 16,384 rows of a dozen columns of strings
# held 10 MiB at once, most of a small report's peak (the 2-GPU H100 slice: 16,583 NVTX rows).
CHUNK_ROWS = 1 << 10
# Rows joined into one piece of text at a time: the joined lines of a whole chunk would
# add a copy of the chunk's text to the peak.
JOIN_ROWS = 1 << 10


def defuse(value: Any) -> Any:
    """A text cell a spreadsheet would evaluate, made inert with a leading apostrophe."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def _cell(value: Any) -> str:
    """One value as DataFrame.to_csv writes it (floats by repr, missing values empty)."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float):
        return "" if value != value else repr(value)
    if isinstance(value, str):
        # a str subclass (an enum member) as its value, which format() would not give (it
        # formats a str-mixin member as its name): str.__str__ makes it a plain str
        return defuse(str.__str__(value))  # type: ignore[no-any-return]
    return str(value)


def _cells(column: pd.Series | np.ndarray) -> tuple[list[Any], bool]:
    """A column's cells as DataFrame.to_csv writes them, text defused: a whole column at a
    time (tolist() gives Python values), with no call per cell for numbers, plain text and
    missing values. Integers and booleans stay Python ints and bools, whose text (str() and
    format() agree) is made where the row is. The flag: whether the column holds text
    (which may need quoting)."""
    values = column.tolist()
    kind = column.dtype.kind if isinstance(column.dtype, np.dtype) else ""
    if kind in ("i", "u", "b"):
        return values, False
    if kind == "f":
        return [repr(v) if v == v else "" for v in values], False
    start = FORMULA_START
    return [
        ("'" + v if v.startswith(start) else v) if (t := type(v)) is str
        else "" if v is None else str(v) if t is int else _cell(v)
        for v in values
    ], True


def _field(text: str) -> str:
    """`text` as the csv module writes it as one field of a row of several."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow([text, ""])
    return buf.getvalue()[:-2]  # without the empty second field's "," and the line end


# The characters that make the csv module quote a field here (the delimiter, the quote
# character, line ends; which ones depends on the Python version, so it is asked).
_QUOTED = tuple(ch for ch in map(chr, range(128)) if _field(f"a{ch}b") != f"a{ch}b")


def _quoted(cells: list[str]) -> list[str]:
    """A text column's cells as the csv module writes them: the few that need it quoted."""
    joined = "".join(cells)
    if not any(ch in joined for ch in _QUOTED):
        return cells
    return [_field(v) if any(ch in v for ch in _QUOTED) else v for v in cells]


def render_frame(rows: pd.DataFrame) -> str:
    """The CSV text of `rows`: what to_csv(index=False) writes, with the spreadsheet guard,
    in a fraction of its time: whole columns at a time, CHUNK_ROWS rows at a time (a cell is
    a Python string until it is written, and a table can have millions of rows), each row
    joined with commas. Only text cells can need quoting (a number's text never does); those
    the csv module quotes are quoted by it. A single column goes through the csv module
    whole (it writes an empty one-field row as "")."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow([str(c) for c in rows.columns])
    # By position (names may repeat); a column of a numpy dtype as its array, whose slices
    # cost nothing next to a Series' and give the same values from tolist().
    cols = [col.to_numpy() if isinstance(col.dtype, np.dtype) else col for _, col in rows.items()]
    # One row's text: each cell by format(), which writes an int (or bool) as str() does,
    # without a string object per cell first, and a text cell as itself
    row = ",".join(["{}"] * len(cols))
    for lo in range(0, len(rows), CHUNK_ROWS):
        part = cols if len(rows) <= CHUNK_ROWS else [
            c[lo : lo + CHUNK_ROWS] if isinstance(c, np.ndarray) else c.iloc[lo : lo + CHUNK_ROWS] for c in cols]
        cells = [_cells(c) for c in part]
        if len(cells) < 2:
            out.writerows(zip(*(c for c, _ in cells), strict=True))
            continue
        text = [_quoted(c) if is_text else c for c, is_text in cells]
        for at in range(0, len(text[0]), JOIN_ROWS):
            block = [c[at : at + JOIN_ROWS] for c in text]
            buf.write("\n".join(map(row.format, *block)))
            buf.write("\n")
    return buf.getvalue()


def render_table(table: Table) -> str:
    return render_frame(table.rows())


def files(report: Report, shared: Shared | None = None) -> Iterator[tuple[str, str]]:
    """(file name, CSV text) of every table, one at a time: a table's text is made when the
    previous one has been taken, so a writer that puts each on disk holds one at a time."""
    shared = shared_for(report, shared)
    for stem, table in tables(report).items():
        if table.frame is None:  # a metric that did not run: the header alone
            yield f"{stem}.csv", render_frame(pd.DataFrame(columns=list(columns(stem, table.columns))))
        else:
            yield f"{stem}.csv", render_frame(frame(report, stem, shared))


def render(report: Report, shared: Shared | None = None) -> dict[str, str]:
    """File name -> CSV text of every table."""
    return dict(files(report, shared))
