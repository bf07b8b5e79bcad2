"""tables/*.csv: every table a metric declares, with a header row even when empty or skipped.

Tables holding kernel names (labels.KERNEL_TABLES) get a `label` column right after the
name: the label report.md, report.html and the plots show for that kernel.

Text cells that a spreadsheet would run as a formula (starting with =, +, -, @, tab or CR;
a kernel or range name comes from someone else's trace) get a leading apostrophe, the
usual CSV-injection guard. Only CSV output does this; report.json keeps the exact names.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from nsys_llm_explainer.labels import KERNEL_TABLES, LABEL_COLUMN
from nsys_llm_explainer.metrics import REGISTRY
from nsys_llm_explainer.model import MetricResult, Report, Table

EXTENSION = ".csv"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


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
    if not text_cols:
        return frame
    out = frame.copy()
    for c in text_cols:
        out[c] = out[c].map(defuse)
    return out


def render_frame(rows: pd.DataFrame) -> str:
    text: str = _defused(rows).to_csv(index=False, lineterminator="\n")
    return text


def render_table(table: Table) -> str:
    return render_frame(table.rows())


def render(report: Report) -> dict[str, str]:
    return {f"{stem}.csv": render_frame(frame(report, stem)) for stem in tables(report)}
