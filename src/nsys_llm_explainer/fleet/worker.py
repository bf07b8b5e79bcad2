"""The per-trace task that runs in a worker process (local pool or Dask worker).

summarize(task) analyzes one trace with api.explain (or takes the cached result), reads the
per-process numbers fleet needs (extract.py) and returns only that compact summary: never
the report or the trace's columns. It never raises: a failing trace comes back with its
error message (without the path, which the outputs show beside it), so the other traces go
on.

The few things fleet reads from one trace's report: its JSON document (report.json, with
the optional `diagnosis` object) and the per-step table of the steps metric."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from nsys_llm_explainer import api
from nsys_llm_explainer.errors import ExplainError
from nsys_llm_explainer.fleet import cache, extract
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import MetricResult, typed_result
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.results.serving import Serving
from nsys_llm_explainer.trace import formats
from nsys_llm_explainer.trace.data import Unavailable

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


ARRAY_TAG = "int64"


@frozen
class Task:
    path: str  # shown in outputs
    abspath: str  # opened
    options: Options
    cache_dir: str | None  # None: the worker's default location
    use_cache: bool = True


def options_key(options: Options) -> dict[str, Any]:
    """The options that change a trace's numbers (those that only change rendering do not)."""
    doc = options.to_json()
    for k in ("top_n", "max_gaps", "select", "ignore", "include_capture_info", "timeout_s"):
        doc.pop(k, None)
    return doc


def encode(value: Any) -> Any:
    """numpy arrays -> {"int64": [...]} so a summary can be stored as JSON."""
    if isinstance(value, np.ndarray):
        return {ARRAY_TAG: value.astype(np.int64).tolist()}
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and ARRAY_TAG in value:
            return np.asarray(value[ARRAY_TAG], dtype=np.int64)
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def _analyze(task: Task, path: Path) -> tuple[dict[str, Any], str]:
    report = api.explain(path, task.options, jobs=1)
    doc = as_dict(report)
    data = formats.open_trace(path, kernel_name=task.options.kernel_name, jobs=1)
    try:
        ranks = extract.ranks(
            data, steps_frame(report), skipped_reason(doc, "steps")
        )
        points = serving_points(report)
        for r in ranks:
            r["serving"] = points.get(r["pid"])
            r["idle_causes"] = idle_for(doc, r["pid"])
            r["diagnosis"] = verdict_for(doc, r["pid"])
            r["world"] = world(doc)
            r["gpus"] = gpu_names(doc, r["devices"])
    finally:
        data.close()
    fmt = formats.sniff(path)
    summary = {"format": fmt.word if fmt else None, "ranks": ranks, "warnings": len(doc.get("warnings", []))}
    return summary, json_text(doc)


def error_text(message: str, task: Task) -> str:
    """The error without the trace's path in front (outputs show it beside the error), and with
    the path as shown wherever the message names the file."""
    text = message.replace(task.abspath, task.path)
    for prefix in (f"{task.path}: ", f"{task.abspath}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def summarize(task: Task) -> dict[str, Any]:
    t0 = time.perf_counter()
    out: dict[str, Any] = {"path": task.path, "ok": False, "error": None, "format": None,
                           "ranks": [], "warnings": 0}
    timing = {"seconds": 0.0, "cached": False, "cache_stored": False,
              "worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        path = Path(task.abspath)
        root = Path(task.cache_dir) if task.cache_dir else cache.default_dir()
        k = cache.key(cache.identity(path), options_key(task.options)) if task.use_cache else ""
        hit = cache.load(root, k) if task.use_cache else None
        if hit is not None:
            summary = decode(hit)
            timing["cached"] = True
        else:
            summary, report_text = _analyze(task, path)
            if task.use_cache:
                timing["cache_stored"] = cache.store(root, k, report_text, encode(summary))
        out.update(summary, ok=True)
    except ExplainError as exc:
        out["error"] = error_text(exc.message, task)
    except Unavailable as exc:  # a table fleet needs is not in the trace: a fact of the input
        out["error"] = exc.reason
    except OSError as exc:
        out["error"] = f"cannot read the trace ({exc.strerror or exc})"
    except Exception as exc:  # noqa: BLE001 - one trace's failure must not stop the others
        out["error"] = f"internal error ({type(exc).__name__}: {exc})"
    timing["seconds"] = round(time.perf_counter() - t0, 3)
    out["timing"] = timing
    return out


def unreadable(paths: list[str]) -> list[str]:
    """The paths this process cannot open for reading (run on a Dask worker)."""
    bad = []
    for p in paths:
        try:
            with open(p, "rb") as fh:
                fh.read(1)
        except OSError:
            bad.append(p)
    return bad
