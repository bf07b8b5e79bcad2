"""A capture cut to a time window, for the half-split stability check: the verdict of each
half of a steady capture must agree with the verdict of the whole (diagnosis/verdict.agree).

The source is opened read-only and copied (SQLite's backup API) into a new file beside the
test; rows of the activity tables whose start lies outside the window are deleted from the
copy. A PyTorch profiler trace keeps its metadata and the events whose `ts` lies inside."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "NVTX_EVENTS", "OSRT_API", "CUDA_GPU_MEMORY_USAGE_EVENTS")


def nsys_halves(src: Path, out: Path) -> tuple[Path, Path]:
    """The first and the second half of an export's kernel span, as two new exports in `out`."""
    con = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
    try:
        t0, t1 = con.execute("SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    finally:
        con.close()
    mid = (t0 + t1) // 2
    return (nsys_window(src, out / f"{src.stem}_1.sqlite", None, mid),
            nsys_window(src, out / f"{src.stem}_2.sqlite", mid, None))


def nsys_window(src: Path, dst: Path, t0: int | None, t1: int | None) -> Path:
    source = sqlite3.connect(f"{src.resolve().as_uri()}?mode=ro", uri=True)
    copy = sqlite3.connect(dst)
    try:
        source.backup(copy)
        tables = {r[0] for r in copy.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for t in ACTIVITY:
            if t in tables and any(r[1] == "start" for r in copy.execute(f"PRAGMA table_info({t})")):
                if t0 is not None:
                    copy.execute(f'DELETE FROM {t} WHERE "start" < ?', (t0,))
                if t1 is not None:
                    copy.execute(f'DELETE FROM {t} WHERE "start" >= ?', (t1,))
        copy.commit()
    finally:
        source.close()
        copy.close()
    return dst


def kineto_halves(src: Path, out: Path) -> tuple[Path, Path]:
    opener: Any = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    kernels = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("cat") == "kernel"]
    t0 = min(float(e["ts"]) for e in kernels)
    t1 = max(float(e["ts"]) + float(e.get("dur", 0)) for e in kernels)
    mid = (t0 + t1) / 2
    stem = src.name.split(".")[0]
    return (_kineto_window(doc, out / f"{stem}_1.json", None, mid),
            _kineto_window(doc, out / f"{stem}_2.json", mid, None))


def _kineto_window(doc: dict[str, Any], dst: Path, t0: float | None, t1: float | None) -> Path:
    def keep(e: Any) -> bool:
        if not isinstance(e, dict) or "ts" not in e or e.get("ph") == "M":
            return True
        ts = float(e["ts"])
        return (t0 is None or ts >= t0) and (t1 is None or ts < t1)

    dst.write_text(json.dumps({**doc, "traceEvents": [e for e in doc["traceEvents"] if keep(e)]}), encoding="utf-8")
    return dst
