"""The per-trace task that runs in a worker process (local pool or Dask worker).

summarize(task) analyzes one trace with api.explain (or takes the cached result), reads the
per-process numbers fleet needs (extract.py) and returns only that compact summary: never
the report or the trace's columns. It never raises: a failing trace comes back with its
error message (without the path, which the outputs show beside it), so the other traces go
on.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nsys_llm_explainer import api
from nsys_llm_explainer.errors import ExplainError
from nsys_llm_explainer.fleet import cache, extract, report_view
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.trace import formats
from nsys_llm_explainer.trace.data import Unavailable

ARRAY_TAG = "int64"


@dataclass(frozen=True)
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
    doc = report_view.as_dict(report)
    data = formats.open_trace(path, kernel_name=task.options.kernel_name, jobs=1)
    try:
        ranks = extract.ranks(
            data, report_view.steps_frame(report), report_view.skipped_reason(doc, "steps")
        )
        points = report_view.serving_points(report)
        for r in ranks:
            r["serving"] = points.get(r["pid"])
            r["idle_causes"] = report_view.idle_for(doc, r["pid"])
            r["diagnosis"] = report_view.verdict_for(doc, r["pid"])
            r["world"] = report_view.world(doc)
            r["gpus"] = report_view.gpu_names(doc, r["devices"])
    finally:
        data.close()
    fmt = formats.sniff(path)
    summary = {"format": fmt.word if fmt else None, "ranks": ranks, "warnings": len(doc.get("warnings", []))}
    return summary, report_view.json_text(doc)


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
