"""Compare nsys-llm-explain with its peers on the same traces, figures and timings side by side.

    .venv/bin/python benchmarks/peers.py TRACE [TRACE ...] \\
        --hta-python /path/to/hta-venv/bin/python --nsysai-python /path/to/nsysai-venv/bin/python

Per trace it runs, each timed as a whole (interpreter start, import, parse, analyses):

- the simple reference (benchmarks/peers_reference.py, in this process): plain json/sqlite3;
- nsys-llm-explain (this interpreter, ``-m nsys_llm_explainer TRACE --out DIR --format json``),
  reading metrics.gpu_idle, metrics.top_kernels, metrics.idle_causes and metrics.launch_overhead
  from report.json; on
  an input it cannot read it says so and goes on;
- Holistic Trace Analysis on PyTorch profiler (Kineto) traces (``*.json``, ``*.json.gz``), in
  the ``--hta-python`` interpreter (benchmarks/peers_hta_driver.py). When the trace has
  fractional microsecond timestamps HTA is run a second time with HTA_DISABLE_NS_ROUNDING=1,
  because its default rounding changes (or breaks) the figures;
- nsys-ai on Nsight Systems SQLite exports, in the ``--nsysai-python`` interpreter
  (benchmarks/peers_nsysai_driver.py).

The peers are never imported here: each runs in its own virtual environment, so neither is
a dependency of the project. docs/peers.md explains every definitional difference.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.peers_reference import reference  # noqa: E402
from benchmarks.peers_table import print_trace  # noqa: E402

HERE = Path(__file__).resolve().parent
HTA_DRIVER = HERE / "peers_hta_driver.py"
NSYSAI_DRIVER = HERE / "peers_nsysai_driver.py"
PEER_TIMEOUT_S = 900


def is_kineto(path: Path) -> bool:
    return path.name.lower().endswith((".json", ".json.gz"))


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "(no output)"


def run_driver(python: str, driver: Path, trace: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """One peer analysis in its own interpreter: its JSON result plus the wall time of the
    whole child process, or an ``error`` saying why there is no result."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([python, str(driver), str(trace)], capture_output=True, text=True,
                              timeout=PEER_TIMEOUT_S, env={**os.environ, **(env or {})}, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"could not run {python}: {exc}", "wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    try:
        result: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": f"driver exited {proc.returncode}: {_last_line(proc.stderr)}", "wall_s": wall}
    result["wall_s"] = wall
    return result


def run_ours(trace: Path, command: list[str]) -> dict[str, Any]:
    """nsys-llm-explain on the trace (report.json only): the three metrics compared, the wall
    time of the whole process, or ``error`` with its exit code and one-line message."""
    with tempfile.TemporaryDirectory(prefix="nle-peers-") as tmp:
        out_dir = Path(tmp) / "report"
        t0 = time.perf_counter()
        proc = subprocess.run([*command, str(trace), "--out", str(out_dir), "--format", "json", "--quiet"],
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        report = out_dir / "report.json"
        if proc.returncode != 0 or not report.is_file():
            return {"error": f"our tool could not read this input (exit {proc.returncode}: "
                             f"{_last_line(proc.stderr)})", "wall_s": wall}
        data = json.loads(report.read_text(encoding="utf-8"))
    metrics = data.get("metrics", {})
    return {"wall_s": wall, "version": data.get("tool", {}).get("version"),
            "gpu_idle": metrics.get("gpu_idle"), "top_kernels": metrics.get("top_kernels"),
            "idle_causes": metrics.get("idle_causes"), "launch_overhead": metrics.get("launch_overhead")}


def repeated(fn: Callable[[], dict[str, Any]], repeat: int) -> dict[str, Any]:
    """The last of `repeat` runs, its wall_s replaced by the median of all runs (all in walls_s)."""
    runs = [fn() for _ in range(max(repeat, 1))]
    walls = sorted(r["wall_s"] for r in runs)
    return {**runs[-1], "wall_s": walls[len(walls) // 2], "walls_s": [r["wall_s"] for r in runs]}


def compare(trace: Path, hta_python: str | None, nsysai_python: str | None, ours: list[str],
            top_n: int, repeat: int = 1, nsysai_cache: str = "direct") -> dict[str, Any]:
    def ref_run() -> dict[str, Any]:
        t0 = time.perf_counter()
        ref = reference(trace, top_n)
        return {"result": ref, "wall_s": time.perf_counter() - t0}

    ref_timed = repeated(ref_run, repeat)
    ref = ref_timed["result"]
    result: dict[str, Any] = {"trace": str(trace), "format": "kineto" if is_kineto(trace) else "nsys",
                              "reference": ref, "reference_wall_s": ref_timed["wall_s"],
                              "ours": repeated(lambda: run_ours(trace, ours), repeat)}
    if is_kineto(trace):
        if hta_python:
            result["hta"] = repeated(lambda: run_driver(hta_python, HTA_DRIVER, trace), repeat)
            if ref.get("fractional_timestamps"):
                result["hta_unrounded"] = repeated(lambda: run_driver(hta_python, HTA_DRIVER, trace,
                                                                      {"HTA_DISABLE_NS_ROUNDING": "1"}), repeat)
    elif nsysai_python:
        env = {"NSYS_AI_CACHE_MODE": nsysai_cache}
        result["nsysai"] = repeated(lambda: run_driver(nsysai_python, NSYSAI_DRIVER, trace, env), repeat)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path, help="Kineto .json/.json.gz or Nsight Systems .sqlite")
    ap.add_argument("--hta-python", help="interpreter of a virtual environment with HTA installed")
    ap.add_argument("--nsysai-python", help="interpreter of a virtual environment with nsys-ai installed")
    ap.add_argument("--nsysai-cache", choices=("direct", "parquet"), default="direct",
                    help="nsys-ai's NSYS_AI_CACHE_MODE: direct (default) queries the SQLite file in place; "
                         "parquet builds its cache next to the trace (the trace's folder must be writable)")
    ap.add_argument("--ours", default=shlex.join([sys.executable, "-m", "nsys_llm_explainer"]),
                    help="command that runs nsys-llm-explain (default: this interpreter, -m)")
    ap.add_argument("--top", type=int, default=5, help="kernels per table (default 5)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every tool this many times; wall times are the median (default 1)")
    ap.add_argument("--json", type=Path, help="also write every collected figure to this JSON file")
    a = ap.parse_args(argv)
    missing = [str(t) for t in a.traces if not t.is_file()]
    if missing:
        print(f"peers.py: error: no such trace: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not a.hta_python and not a.nsysai_python:
        print("peers.py: note: no --hta-python or --nsysai-python given; only the reference and "
              "nsys-llm-explain run", file=sys.stderr)
    results = []
    for trace in a.traces:
        res = compare(trace, a.hta_python, a.nsysai_python, shlex.split(a.ours), max(a.top, 1), a.repeat,
                      a.nsysai_cache)
        print_trace(res, max(a.top, 1))
        results.append(res)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
