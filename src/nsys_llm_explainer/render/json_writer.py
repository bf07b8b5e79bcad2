"""report.json: the machine-readable contract (schema: schema/report.schema.json), a summary
of the report whose long lists are cut (summarize, below)."""

from __future__ import annotations

import dataclasses
import json
import math
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from nsys_llm_explainer.about import TOOL_NAME, __version__
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject, JsonValue, MetricResult, Report, TraceInfo
from nsys_llm_explainer.render.output import joined

if TYPE_CHECKING:
    from nsys_llm_explainer.render.report_types import ReportDoc, SectionDoc

SCHEMA_VERSION = "3.1"
EXTENSION = ".json"

S = TypeVar("S", bound="SectionDoc")


def ok(section: S | None) -> S | None:
    """A metric's section when the metric ran (status "ok"), else None."""
    return section if section is not None and section.get("status") == "ok" else None


_AS_IS = (str, int, bool, type(None))


def plain(value: Any) -> Any:
    """Convert numpy scalars, enums, dataclasses and NaN into JSON-ready Python values."""
    if type(value) in _AS_IS:  # the common case first: most values are names and integers
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, float | np.floating):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    return value


def _diagnosis(report: Report) -> Any:
    """A report built by hand (tests, scripts) without a diagnosis gets the one its metrics give."""
    from nsys_llm_explainer.diagnosis import accounting, diagnose

    return diagnose(report.trace, report.metrics, accounting.build(report.metrics))


def _trace(info: TraceInfo) -> JsonObject:
    """report.json's trace section: TraceInfo's fields in order, its format_details under the
    name the contract gives them (trace.kineto, null for an Nsight Systems export)."""
    trace: JsonObject = plain(dataclasses.asdict(info))
    return {("kineto" if k == "format_details" else k): v for k, v in trace.items()}


def _metrics(report: Report) -> dict[str, JsonObject]:
    top_n = n if isinstance(n := report.options.get("top_n"), int) else 20
    metrics: dict[str, JsonObject] = {}
    for mid, outcome in report.metrics.items():
        if isinstance(outcome, MetricResult):
            data = summarize(mid, outcome.data, top_n)
            metrics[mid] = {"status": "ok", **data, "notes": list[JsonValue](outcome.notes)}
        else:
            metrics[mid] = {"status": "skipped", "reason": outcome.reason}
    return metrics


def report_doc(report: Report) -> ReportDoc:
    """report.json as the writers read it, built from the Report (Shared.document caches it:
    use that)."""
    doc: ReportDoc = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "trace": _trace(report.trace),
        "options": plain(report.options),
        "warnings": list(report.warnings),
        "limitations": list(report.limitations),
        "diagnosis": plain(report.diagnosis or _diagnosis(report)),
        "findings": plain(report.findings),
        "metrics": plain(_metrics(report)),
    }
    if report.capture_info is not None:
        doc["capture_info"] = plain(report.capture_info)
    return doc


def report_dict(report: Report) -> JsonObject:
    """report.json as a plain JSON object of its own (diff and fleet read it)."""
    doc: JsonObject = plain(report_doc(report))
    return doc


def render(report: Report) -> str:
    """report.json's text (the writers take the document Shared.document holds: dumps)."""
    return dumps(report_doc(report))


def dumps(doc: ReportDoc) -> str:
    """json.dumps(doc, indent=2) and a line end, joined a block of pieces at a time."""
    return joined(json.JSONEncoder(indent=2, ensure_ascii=False, allow_nan=False).iterencode(doc)) + "\n"


# report.json stays a summary: long lists keep their first rows, the rest is in a CSV.
#
# The lists below can grow with the trace (one row per kernel name, NVTX name, process or
# graph). report.json keeps the first max(KEEP, --top-n) rows of each, in the metric's own
# order (largest first), so report.md can still show --top-n of them; the CSV table named
# beside it holds every row. Every metric that ran carries `left_out`, empty when nothing was
# cut:
#
#     "left_out": {"ranges": {"rows": 76, "csv": "tables/nvtx_ranges.csv"}}
#
# `rows` counts the list rows not in report.json. The NVTX lists are per normalized name while
# their CSV tables hold one row per raw name with a `normalized_name` column: the rows left out
# are the normalized names beyond the kept ones, found by grouping the CSV on that column.
KEY = "left_out"


@frozen
class Cut:
    metric_id: str
    key: str  # the list in the metric's data
    csv: str  # stem of the CSV table holding every row
    keep: int  # rows kept (at least --top-n)


CUTS: tuple[Cut, ...] = (
    Cut("top_kernels", "kernels", "kernels", 500),
    Cut("nvtx_ranges", "ranges", "nvtx_ranges", 100),
    Cut("nvtx_attribution", "ranges", "nvtx_attribution", 100),
    Cut("per_process", "processes", "processes", 100),
    Cut("cuda_graphs", "graphs", "cuda_graphs", 100),
    Cut("compute_efficiency", "operations", "compute_operations", 50),
    Cut("compute_efficiency", "kernels", "compute_kernels", 50),
    Cut("model_utilization", "steps", "model_utilization_steps", 100),
    Cut("step_work", "names", "step_work_kernels", 500),
    Cut("serving", "iterations", "iterations", 200),
    Cut("ncu", "kernels", "ncu_kernels", 100),
    Cut("ncu", "launches", "ncu_launches", 200),
)
_BY_METRIC: dict[str, tuple[Cut, ...]] = {}
for _cut in CUTS:
    _BY_METRIC[_cut.metric_id] = _BY_METRIC.get(_cut.metric_id, ()) + (_cut,)


def csv_path(stem: str) -> str:
    return f"tables/{stem}.csv"


def summarize(metric_id: str, data: JsonObject, top_n: int) -> JsonObject:
    """`data` with its long lists cut and `left_out` added (a shallow copy; `data` is kept)."""
    out = dict(data)
    left: JsonObject = {}
    for cut in _BY_METRIC.get(metric_id, ()):
        rows = out.get(cut.key)
        keep = max(cut.keep, top_n)
        if isinstance(rows, list) and len(rows) > keep:
            out[cut.key] = rows[:keep]
            left[cut.key] = {"rows": len(rows) - keep, "csv": csv_path(cut.csv)}
    out[KEY] = left
    return out


def more(metric: JsonObject, key: str, shown: int) -> int:
    """Rows of the list `key` not among the first `shown`: those cut from report.json
    included (templates use it for "N more in tables/...")."""
    rows = metric.get(key)
    listed = len(rows) if isinstance(rows, list) else 0
    left = metric.get(KEY)
    cut = left.get(key) if isinstance(left, dict) else None
    count = cut.get("rows") if isinstance(cut, dict) else None
    return max(listed - shown, 0) + (count if isinstance(count, int) else 0)


__all__ = ["CUTS", "KEY", "Cut", "csv_path", "more", "summarize"]
