"""The few things fleet reads from one trace's report: its JSON document (report.json, with
the optional `diagnosis` object) and the per-step table of the steps metric."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer.model import MetricResult, typed_result
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.results.serving import Serving

NA = "n/a"


def as_dict(report: Any) -> dict[str, Any]:
    """report.json as a dict (a Report with to_dict() provides it itself)."""
    to_dict = getattr(report, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    return json_writer.report_dict(report)


def json_text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def steps_frame(report: Any) -> pd.DataFrame | None:
    """Rows of tables/steps.csv (step, phase, pid, start_ns, end_ns, latency_ns ...)."""
    metrics = getattr(report, "metrics", {})
    outcome = metrics.get("steps") if isinstance(metrics, dict) else None
    if not isinstance(outcome, MetricResult):
        return None
    for table in outcome.tables:
        if table.name == "steps":
            return table.rows()
    return None


SERVING_FIELDS = ("sequences", "tokens", "kv_tokens", "gpu_span_ns")
PHASE_CODES = {"prefill": 0, "decode": 1, "mixed": 2}


def serving_points(report: Any) -> dict[int, dict[str, np.ndarray]]:
    """Per process: its serving iterations as columns (phase code, sequences, tokens,
    kv_tokens, gpu_span_ns; -1 where unknown) for the sweep's latency fits."""
    metrics = getattr(report, "metrics", {})
    s = typed_result(metrics, Serving) if isinstance(metrics, dict) else None
    if s is None:
        return {}
    out: dict[int, dict[str, np.ndarray]] = {}
    for pid in sorted({it.pid for it in s.iterations}):
        its = [it for it in s.iterations if it.pid == pid and it.phase in PHASE_CODES]
        cols = {"phase": np.array([PHASE_CODES[str(it.phase)] for it in its], dtype=np.int64)}
        for f in SERVING_FIELDS:
            cols[f] = np.array([-1 if getattr(it, f) is None else getattr(it, f) for it in its], dtype=np.int64)
        out[pid] = cols
    return out


def skipped_reason(doc: dict[str, Any], metric_id: str) -> str | None:
    m = doc.get("metrics", {}).get(metric_id)
    if isinstance(m, dict) and m.get("status") == "skipped":
        return str(m.get("reason"))
    if m is None:
        return f"the report has no {metric_id} metric"
    return None


def verdict_for(doc: dict[str, Any], pid: int) -> dict[str, Any]:
    """diagnosis.verdict/summary/primary of the process (where the diagnosis lists processes),
    else of the whole trace; "n/a" when the report carries no diagnosis."""
    diag = doc.get("diagnosis")
    out: dict[str, Any] = {"verdict": NA, "summary": None, "primary_kind": None, "primary_impact_pct": None}
    if not isinstance(diag, dict):
        return out
    src: dict[str, Any] = diag
    procs = diag.get("processes")
    if isinstance(procs, list):
        for p in procs:
            if isinstance(p, dict) and p.get("pid") == pid and p.get("verdict"):
                src = p
                break
    raw = src.get("primary")
    primary: dict[str, Any] = raw if isinstance(raw, dict) else {}
    out["verdict"] = str(src.get("verdict") or NA)
    out["summary"] = src.get("summary") if isinstance(src.get("summary"), str) else None
    out["primary_kind"] = primary.get("kind") if isinstance(primary.get("kind"), str) else None
    pct = primary.get("impact_pct")
    out["primary_impact_pct"] = float(pct) if isinstance(pct, int | float) else None
    return out


def idle_for(doc: dict[str, Any], pid: int) -> dict[str, int] | None:
    """idle_causes: idle ns per cause over the devices this process owns (None: not measured)."""
    m = doc.get("metrics", {}).get("idle_causes")
    if not isinstance(m, dict) or m.get("status") != "ok":
        return None
    out: dict[str, int] = {}
    found = False
    for dev in m.get("devices", []):
        if pid not in (dev.get("owner_pids") or []):
            continue
        found = True
        for c in dev.get("causes", []):
            out[c["cause"]] = out.get(c["cause"], 0) + int(c["idle_ns"])
    return out if found else None


def world(doc: dict[str, Any]) -> dict[str, Any] | None:
    """Rank, world size and backend the trace records (report.json trace.distributed)."""
    d = doc.get("trace", {}).get("distributed")
    return dict(d) if isinstance(d, dict) else None


def gpu_names(doc: dict[str, Any], devices: list[int]) -> list[str]:
    """Model names of the given devices (trace.gpus); "unknown model" where not recorded."""
    names = {g.get("device_id"): g.get("name") for g in doc.get("trace", {}).get("gpus", []) if isinstance(g, dict)}
    return [str(names.get(d) or "unknown model") for d in devices]
