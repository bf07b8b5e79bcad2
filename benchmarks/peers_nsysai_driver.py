"""Run nsys-ai on one Nsight Systems SQLite export and print its figures as one JSON object.

Executed by benchmarks/peers.py with the interpreter of a separate virtual environment
that has nsys-ai installed (``pip install nsys-ai duckdb==1.5.5
duckdb-extension-sqlite-scanner==1.5.5``); it is never imported by nsys-llm-explain or its
tests. Usage:

    /path/to/nsysai-venv/bin/python benchmarks/peers_nsysai_driver.py TRACE.sqlite

What it calls, per GPU (the same functions as the CLI commands named in brackets):
``summary.gpu_summary`` [``nsys-ai summary``], ``overlap.overlap_analysis`` (device-level
idle by interval union), the ``gpu_idle_gaps`` skill (per-stream gaps over 1 ms), the
``profile_health_manifest`` skill (its one-shot summary: sync, NVTX, root causes), and
``EvidenceBuilder(...).build()`` [``nsys-ai analyze --format json``]: its findings.

nsys-ai queries through DuckDB's sqlite_scanner when that extension loads and through
sqlite3 otherwise (``engine`` says which). The extension is never downloaded: when it is
not installed yet and the ``duckdb-extension-sqlite-scanner`` wheel is present, it is
installed from that wheel's file into DuckDB's extension directory (~/.duckdb). Unless
NSYS_AI_CACHE_MODE is set, the Parquet cache nsys-ai would write next to the trace is
turned off (NSYS_AI_CACHE_MODE=direct), so the trace's folder is never written to.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import sys
import time
from typing import Any

from peers_driver_common import dist_version, error_line, timed


def ensure_sqlite_scanner() -> str:
    """'loaded', 'installed from wheel' or why DuckDB's sqlite_scanner is unavailable."""
    try:
        import duckdb
    except ImportError:
        return "duckdb not installed"
    con = duckdb.connect()
    try:
        con.execute("LOAD sqlite_scanner")
        return "loaded"
    except duckdb.Error:
        pass
    try:
        import duckdb_extension_sqlite_scanner as wheel
    except ImportError:
        return "not installed (no duckdb-extension-sqlite-scanner wheel)"
    files = glob.glob(os.path.join(os.path.dirname(wheel.__file__), "extensions", "*",
                                   "sqlite_scanner.duckdb_extension"))
    if not files:
        return "not installed (wheel holds no extension file)"
    try:
        con.execute(f"INSTALL '{files[0]}'")
        con.execute("LOAD sqlite_scanner")
        return "installed from wheel"
    except duckdb.Error as exc:
        return f"not installed ({error_line(exc)})"


def _finding(f: Any) -> dict[str, Any]:
    d = f.to_dict()
    return {k: d.get(k) for k in ("id", "label", "severity", "category", "note", "headroom_ms")}


def _device(out: dict[str, Any], prof: Any, dev: int) -> dict[str, Any]:
    """Every per-GPU analysis for one device; failures are recorded in out["errors"]."""
    from nsys_ai.evidence_builder import EvidenceBuilder
    from nsys_ai.overlap import overlap_analysis
    from nsys_ai.skills.registry import run_skill
    from nsys_ai.summary import gpu_summary

    def skill(name: str) -> Any:
        return run_skill(name, prof.query_conn(), raw=True, device=dev)

    d: dict[str, Any] = {}
    d["summary"] = timed(out, "summary", lambda: gpu_summary(prof, dev))
    d["overlap"] = timed(out, "overlap", lambda: overlap_analysis(prof, dev))
    gaps = timed(out, "gpu_idle_gaps", lambda: skill("gpu_idle_gaps")) or []
    d["gpu_idle_gaps"] = next((r for r in gaps if r.get("_summary")), None)
    d["gpu_idle_gaps_top"] = [r for r in gaps if not r.get("_summary")][:5]
    manifest = timed(out, "profile_health_manifest", lambda: skill("profile_health_manifest"))
    d["manifest"] = manifest[0] if manifest else None
    report = timed(out, "findings", lambda: EvidenceBuilder(prof, device=dev).build())
    if report is not None:
        d["findings"] = [_finding(f) for f in report.findings]
        d["skipped"] = [s.to_dict() for s in report.skipped]
    return d


def analyse(path: str) -> dict[str, Any]:
    os.environ.setdefault("NSYS_AI_CACHE_MODE", "direct")
    out: dict[str, Any] = {"tool": "nsys-ai", "trace": path, "time_unit": "ms", "seconds": {}, "errors": {},
                           "version": dist_version("nsys-ai"), "duckdb": dist_version("duckdb"),
                           "cache_mode": os.environ["NSYS_AI_CACHE_MODE"]}
    t0 = time.perf_counter()
    out["sqlite_scanner"] = ensure_sqlite_scanner()
    from nsys_ai import evidence_builder, overlap, summary  # noqa: F401 - imported here to time the import
    from nsys_ai import profile as nsys_profile
    from nsys_ai.skills.registry import run_skill

    out["seconds"]["import"] = round(time.perf_counter() - t0, 4)
    prof = timed(out, "open", lambda: nsys_profile.open(path))
    if prof is None:
        out["seconds"]["total"] = round(time.perf_counter() - t0, 4)
        return out
    out["engine"] = "duckdb" if getattr(prof, "db", None) is not None else "sqlite3"
    out["devices"] = {}
    for dev in prof.meta.devices:
        out["devices"][str(dev)] = _device(out, prof, dev)
    # Top kernels over all devices, as the top_kernels skill groups them.
    out["top_kernels_skill"] = timed(out, "top_kernels",
                                      lambda: run_skill("top_kernels", prof.query_conn(), raw=True))
    out["seconds"]["total"] = round(time.perf_counter() - t0, 4)
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    with contextlib.redirect_stdout(sys.stderr):
        result = analyse(sys.argv[1])
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
