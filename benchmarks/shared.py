"""The whole CLI on every shared real trace: wall time and report.json size per trace.

    python benchmarks/run.py --shared     # ../shared/traces/nsys/*.sqlite, kineto/*.json[.gz]
    python benchmarks/run.py --shared --repeat 5 --json out.json

Small real traces should answer at once (target: TARGET_WALL_S per run, process start-up
included, on the 2-core development machine); report.json should stay a summary (TARGET_JSON_BYTES).
Each trace runs `repeat` times in a child process; the median wall time is judged against the
target and the best is shown beside it (the spread measures the machine's noise more than the
tool), with the CPU time of the best run. Traces that are absent are skipped with a line
saying so.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import measure

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
TARGET_WALL_S = 1.0
TARGET_JSON_BYTES = 1_000_000


def traces(folder: Path = SHARED_TRACES) -> list[Path]:
    """Nsight Systems exports (nsys/*.sqlite) and PyTorch profiler traces (kineto/*.json[.gz])."""
    nsys, kineto = folder / "nsys", folder / "kineto"
    found = sorted(nsys.glob("*.sqlite")) if nsys.is_dir() else []
    if kineto.is_dir():
        found += sorted(p for p in kineto.iterdir() if p.name.endswith((".json", ".json.gz")))
    return found


def bench_one(path: Path, work: Path, repeat: int) -> dict[str, Any]:
    runs = []
    out_dir = work / path.stem
    for _ in range(max(1, repeat)):
        shutil.rmtree(out_dir, ignore_errors=True)
        runs.append(measure.run_cli(path, out_dir))
    best = min(runs, key=lambda r: r["wall_s"])
    report = out_dir / "report.json"
    return {
        "trace": path.name,
        "trace_mib": path.stat().st_size / 2**20,
        "exit_code": best["exit_code"],
        "wall_s": best["wall_s"],
        "wall_s_median": statistics.median(r["wall_s"] for r in runs),
        "wall_s_all": [r["wall_s"] for r in runs],
        "cpu_s": best["cpu_s"],
        "peak_rss_mib": best["peak_rss_mib"],
        "report_json_bytes": report.stat().st_size if report.is_file() else None,
        "log": best["log"] if best["exit_code"] else "",
    }


def run(repeat: int = 3, folder: Path = SHARED_TRACES) -> list[dict[str, Any]]:
    found = traces(folder)
    if not found:
        print(f"shared traces: none found in {folder}; skipped")
        return []
    work = Path(tempfile.mkdtemp(prefix="nle-bench-shared-"))
    try:
        return [bench_one(p, work, repeat) for p in found]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def problems(results: list[dict[str, Any]]) -> list[str]:
    out = []
    for r in results:
        if r["exit_code"] != 0:
            out.append(f"{r['trace']}: CLI exited {r['exit_code']}: {r['log']}")
    return out


def print_results(results: list[dict[str, Any]]) -> None:
    if not results:
        return
    print(f"\n== shared real traces ({len(results[0]['wall_s_all'])} runs each)")
    print(f"   {'trace':<32} {'size':>9} {'median':>8} {'best':>8} {'cpu':>7} {'peak RSS':>9} {'report.json':>12}")
    for r in results:
        size = r["report_json_bytes"]
        json_text = f"{size / 1000:,.0f} kB" if size is not None else "-"
        wall_ok = "ok" if r["wall_s_median"] <= TARGET_WALL_S else "MISSED"
        json_ok = "ok" if size is not None and size <= TARGET_JSON_BYTES else "MISSED"
        print(f"   {r['trace']:<32} {r['trace_mib']:7.1f} MiB {r['wall_s_median']:6.2f} s {r['wall_s']:6.2f} s "
              f"{r['cpu_s']:5.2f} s "
              f"{r['peak_rss_mib']:6.0f} MiB {json_text:>12}   wall {wall_ok}, json {json_ok}")
    print(f"   targets: median wall <= {TARGET_WALL_S:.1f} s per run (process start-up included), "
          f"report.json <= {TARGET_JSON_BYTES / 1e6:.0f} MB")
