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
from typing import Any

import pandas as pd

from nsys_llm_explainer.labels import KERNEL_TABLES, LABEL_COLUMN
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import MetricResult, Report, Table

EXTENSION = ".csv"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
SMALL_ROWS = 2_000  # tables up to this many rows are written by the csv module (faster)


def tables(report: Report) -> dict[str, Table]:
    """csv stem -> table, for every declared table of every registered metric."""
    out: dict[str, Table] = {}
    for metric in REGISTRY:
        outcome = report.metrics.get(metric.id)
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


def frame(report: Report, stem: str) -> pd.DataFrame:
    """The rows of tables/<stem>.csv (before the spreadsheet guard); KeyError when unknown."""
    found = tables(report)
    if stem not in found:
        raise KeyError(f"no table {stem!r}; the tables are: {', '.join(found)}")
    table = found[stem]
    rows = table.rows().reset_index(drop=True)
    header = columns(stem, table.columns)
    if header != table.columns:
        name = KERNEL_TABLES[stem]
        labels = report.kernel_labels
        rows.insert(header.index(LABEL_COLUMN), LABEL_COLUMN, [labels(n) for n in rows[name]])
    return rows


def defuse(value: Any) -> Any:
    """A text cell a spreadsheet would evaluate, made inert with a leading apostrophe."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def _defused(frame: pd.DataFrame) -> pd.DataFrame:
    text_cols = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    out = None
    for c in text_cols:
        values = frame[c].tolist()
        # A plain scan is several times faster than the .str accessor; hits are rare.
        hits = [i for i, v in enumerate(values) if isinstance(v, str) and v.startswith(FORMULA_START)]
        if not hits:
            continue
        for i in hits:
            values[i] = "'" + values[i]
        if out is None:
            out = frame.copy()
        out[c] = pd.Series(values, index=frame.index, dtype=object)
    return frame if out is None else out


def _cell(value: Any) -> str:
    """One value as DataFrame.to_csv writes it (floats by repr, missing values empty)."""
    if value is None or value is pd.NA:
        return ""
    if isinstance(value, float):
        return "" if value != value else repr(value)
    if isinstance(value, str):
        return defuse(value)  # type: ignore[no-any-return]
    return str(value)


def _small(rows: pd.DataFrame) -> str:
    """to_csv for a few rows, several times faster: most tables of a report are short."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow([str(c) for c in rows.columns])
    values = [rows[c].tolist() for c in rows.columns]  # tolist(): numpy scalars -> Python
    out.writerows([_cell(v) for v in record] for record in zip(*values, strict=True))
    return buf.getvalue()


def render_frame(rows: pd.DataFrame) -> str:
    if len(rows) <= SMALL_ROWS:
        return _small(rows)
    text: str = _defused(rows).to_csv(index=False, lineterminator="\n")
    return text


def render_table(table: Table) -> str:
    return render_frame(table.rows())


def render(report: Report) -> dict[str, str]:
    out = {}
    for stem, table in tables(report).items():
        if table.frame is None:  # a metric that did not run: the header alone
            out[f"{stem}.csv"] = _small(pd.DataFrame(columns=list(columns(stem, table.columns))))
        else:
            out[f"{stem}.csv"] = render_frame(frame(report, stem))
    return out
