"""The whole tool on a generated PyTorch profiler (Kineto) trace: time, peak memory, totals.

Targets for the ~1 GB trace, judged against a floor measured in the same run on the same
machine: the whole report within TARGET_FLOOR_RATIO x a typed msgspec decode of its events
(benchmarks/floors.py), and the process tree's peak within TARGET_TREE_MB (10^6 bytes).
Used by `benchmarks/run.py --size kineto` (and kineto-small).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from benchmarks import floors, measure
from benchmarks.kineto_synth import KinetoConfig, generate

SIZES: dict[str, KinetoConfig] = {
    "kineto-small": KinetoConfig(mb=20),
    "kineto": KinetoConfig(mb=1000),
}
TARGET_FLOOR_RATIO = 2.0
TARGET_TREE_MB = 1500.0


def check_operators(report_json: Path, expected: dict[str, Any]) -> list[str]:
    ops = json.loads(report_json.read_text(encoding="utf-8"))["metrics"].get("operators", {})
    got = {o["name"]: o["kernel_ns"] for o in ops.get("operators", []) if o["kernel_ns"]}
    want = expected["operator_kernel_ns"]
    return [] if got == want else [f"operators kernel_ns {got} != {want}"]


def bench(name: str, cache: Path) -> dict[str, Any]:
    cfg = SIZES[name]
    path, expected, reused = measure.cached_trace(cfg, cache / f"bench_{name}.pt.trace.json", generate)
    measure.warm_cache(path)
    floor = floors.run("msgspec", path, cache / f"floor_msgspec_{name}.log")
    out_dir = cache / f"report_{name}"
    shutil.rmtree(out_dir, ignore_errors=True)
    cli = measure.run_cli(path, out_dir)
    problems = [f"CLI exited {cli['exit_code']}: {cli['log']}"] if cli["exit_code"] != 0 else []
    if not problems:
        problems = measure.check_totals(out_dir / "report.json", expected)
        problems += check_operators(out_dir / "report.json", expected)
    result = {
        "size": name, "trace": str(path), "trace_mib": path.stat().st_size / 2**20,
        "reused_trace": reused, "generate_s": expected.get("generate_s"), "counts": expected["counts"],
        "msgspec": floor, "cli": {k: v for k, v in cli.items() if k != "log"}, "problems": problems,
    }
    result["ratio_to_msgspec"] = cli["wall_s"] / floor["seconds"] if floor.get("seconds") else None
    if name == "kineto":
        from benchmarks.run import missed_targets

        result["missed"] = missed_targets(result, TARGET_FLOOR_RATIO, TARGET_TREE_MB, "msgspec")
    return result


def print_result(r: dict[str, Any]) -> None:
    origin = "reused" if r["reused_trace"] else f"generated in {r['generate_s']} s"
    print(f"\n== {r['size']}: {r['trace']} ({r['trace_mib']:.0f} MiB, {origin})")
    print("   events: " + ", ".join(f"{k} {n:,}" for k, n in r["counts"].items()))
    floor = r["msgspec"]
    if "seconds" in floor:
        print(f"   msgspec floor (typed decode of every event): wall {floor['seconds']:.2f} s, "
              f"cpu {floor['cpu_s']:.2f} s, {floor['rows']:,} events, "
              f"process peak {floor['peak_tree_rss_mib'] * 2**20 / 1e6:,.0f} MB")
    else:
        print(f"   msgspec floor: unavailable ({floor.get('unavailable')})")
    cli = r["cli"]
    tree = cli["peak_tree_rss_mib"] * 2**20 / 1e6
    print(f"   whole CLI run: wall {cli['wall_s']:.2f} s, cpu {cli['cpu_s']:.2f} s, peak memory: process tree "
          f"{tree:,.0f} MB, main process {cli['peak_main_rss_mib'] * 2**20 / 1e6:,.0f} MB")
    ratio = r["ratio_to_msgspec"]
    if ratio is not None:
        print(f"   ratio: wall {ratio:.2f}x the msgspec floor")
    if r["size"] == "kineto":
        ratio_ok = "ok" if ratio is not None and ratio <= TARGET_FLOOR_RATIO else "MISSED"
        tree_ok = "ok" if tree <= TARGET_TREE_MB else "MISSED"
        print(f"   targets: <= {TARGET_FLOOR_RATIO:g}x the msgspec floor {ratio_ok}, "
              f"process tree <= {TARGET_TREE_MB:,.0f} MB {tree_ok}")
    print("   totals vs sidecar: " + ("ok" if not r["problems"] else "; ".join(r["problems"])))
