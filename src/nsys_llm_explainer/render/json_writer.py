"""report.json: the machine-readable contract (schema: schema/report.schema.json)."""

from __future__ import annotations

import dataclasses
import json
import math
from enum import Enum
from typing import Any

import numpy as np

from nsys_llm_explainer.about import TOOL_NAME, __version__
from nsys_llm_explainer.model import MetricResult, Report, TraceInfo
from nsys_llm_explainer.render.summary import summarize

SCHEMA_VERSION = "3.1"
EXTENSION = ".json"


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


def _trace(info: TraceInfo) -> dict[str, Any]:
    """report.json's trace section: TraceInfo's fields in order, its format_details under the
    name the contract gives them (trace.kineto, null for an Nsight Systems export)."""
    return {("kineto" if k == "format_details" else k): v for k, v in dataclasses.asdict(info).items()}


def report_dict(report: Report) -> dict[str, Any]:
    """report.json as a dict, built from the Report (Shared.document caches it: use that)."""
    top_n = int(report.options.get("top_n", 20))
    metrics: dict[str, Any] = {}
    for mid, outcome in report.metrics.items():
        if isinstance(outcome, MetricResult):
            data = summarize(mid, outcome.data, top_n)
            metrics[mid] = {"status": "ok", **data, "notes": list(outcome.notes)}
        else:
            metrics[mid] = {"status": "skipped", "reason": outcome.reason}
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "trace": _trace(report.trace),
        "options": report.options,
        "warnings": list(report.warnings),
        "limitations": list(report.limitations),
        "diagnosis": report.diagnosis or _diagnosis(report),
        "findings": report.findings,
        "metrics": metrics,
    }
    if report.capture_info is not None:
        out["capture_info"] = report.capture_info
    return plain(out)  # type: ignore[no-any-return]


def render(report: Report) -> str:
    """report.json's text (the writers take the document Shared.document holds: dumps)."""
    return dumps(report_dict(report))


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
