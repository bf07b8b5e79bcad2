"""The whole tool on a generated PyTorch profiler (Kineto) trace: time, peak memory, totals.

Targets (2-core development machine): a ~1 GB trace in <= 60 s and <= 4 GiB peak memory
summed over the process tree. Used by `benchmarks/run.py --size kineto` (and kineto-small).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from benchmarks import measure
from benchmarks.kineto_synth import KinetoConfig, generate

SIZES: dict[str, KinetoConfig] = {
    "kineto-small": KinetoConfig(mb=20),
    "kineto": KinetoConfig(mb=1000),
}
TARGET_WALL_S = 60.0
TARGET_RSS_MIB = 4096.0


def check_operators(report_json: Path, expected: dict[str, Any]) -> list[str]:
    ops = json.loads(report_json.read_text(encoding="utf-8"))["metrics"].get("operators", {})
    got = {o["name"]: o["kernel_ns"] for o in ops.get("operators", []) if o["kernel_ns"]}
    want = expected["operator_kernel_ns"]
    return [] if got == want else [f"operators kernel_ns {got} != {want}"]


def bench(name: str, cache: Path) -> dict[str, Any]:
    cfg = SIZES[name]
    path, expected, reused = measure.cached_trace(cfg, cache / f"bench_{name}.pt.trace.json", generate)
    measure.warm_cache(path)
    out_dir = cache / f"report_{name}"
    shutil.rmtree(out_dir, ignore_errors=True)
    cli = measure.run_cli(path, out_dir)
    problems = [f"CLI exited {cli['exit_code']}: {cli['log']}"] if cli["exit_code"] != 0 else []
    if not problems:
        problems = measure.check_totals(out_dir / "report.json", expected)
        problems += check_operators(out_dir / "report.json", expected)
    return {
        "size": name, "trace": str(path), "trace_mib": path.stat().st_size / 2**20,
        "reused_trace": reused, "generate_s": expected.get("generate_s"), "counts": expected["counts"],
        "cli": {k: v for k, v in cli.items() if k != "log"}, "problems": problems,
    }


def print_result(r: dict[str, Any]) -> None:
    origin = "reused" if r["reused_trace"] else f"generated in {r['generate_s']} s"
    print(f"\n== {r['size']}: {r['trace']} ({r['trace_mib']:.0f} MiB, {origin})")
    print("   events: " + ", ".join(f"{k} {n:,}" for k, n in r["counts"].items()))
    cli = r["cli"]
    rss = max(cli["peak_rss_mib"], cli.get("peak_tree_rss_mib", 0.0))
    print(f"   whole CLI run: wall {cli['wall_s']:.2f} s, cpu {cli['cpu_s']:.2f} s, "
          f"peak RSS {rss:,.0f} MiB (process tree)")
    if r["size"] == "kineto":
        wall_ok = "ok" if cli["wall_s"] <= TARGET_WALL_S else "MISSED"
        rss_ok = "ok" if rss <= TARGET_RSS_MIB else "MISSED"
        print(f"   targets: wall <= {TARGET_WALL_S:.0f} s {wall_ok}, RSS <= {TARGET_RSS_MIB:.0f} MiB {rss_ok}")
    print("   totals vs sidecar: " + ("ok" if not r["problems"] else "; ".join(r["problems"])))
