"""Benchmark the whole tool on a generated vLLM-like trace, and check its totals.

    python benchmarks/run.py --size medium            # make bench
    python benchmarks/run.py --size large             # make bench-large (5M kernels)
    python benchmarks/run.py --compare-sizes          # medium vs large: linear growth?
    python benchmarks/run.py --size kineto            # make bench-kineto (1 GB PyTorch trace)
    python benchmarks/run.py --shared                 # every shared real trace (benchmarks/shared.py)

Times (a) the read floors: the ADBC SQLite driver reading the columns the report needs from
the kernel, runtime and NVTX tables into Arrow (benchmarks/floors.py, the target's
yardstick), and plain Python sqlite3 fetching the same columns; (b) the whole CLI run in a
child process (all metrics, all outputs) with its peak memory, of the main process and of
the whole process tree; (c) in-process, each table loader and each metric. Exits 1 when the
run's report.json totals differ from the generator's sidecar, or when the large trace misses
a target (time over TARGET_FLOOR_RATIO x the ADBC floor, process tree over TARGET_TREE_MB).
With --shared, runs the CLI on every shared real trace instead and reports wall time and
report.json size per trace (skipped when the shared traces are absent).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import floors, kineto_bench, measure, shared  # noqa: E402
from benchmarks.report import print_comparison, print_result  # noqa: E402
from benchmarks.synth import SynthConfig, generate  # noqa: E402

SIZES: dict[str, SynthConfig] = {
    "small": SynthConfig(kernels=20_000, processes=2),
    "medium": SynthConfig(kernels=500_000, processes=4),
    "large": SynthConfig(kernels=5_000_000, processes=4),
}
# Targets for the large trace (5M kernels), judged against floors measured in the same run
# on the same machine: the whole report within TARGET_FLOOR_RATIO x the ADBC read, the
# process tree's peak (main process and every process it starts, summed) within
# TARGET_TREE_MB (10^6 bytes).
TARGET_FLOOR_RATIO = 2.0
TARGET_TREE_MB = 1500.0
TARGET_GROWTH = 12.0


def bench(name: str, cfg: SynthConfig, cache: Path, breakdown: bool) -> dict[str, Any]:
    path, expected, reused = measure.cached_trace(cfg, cache / f"bench_{name}.sqlite", generate)
    measure.warm_cache(path)
    adbc = floors.run("adbc", path, cache / f"floor_adbc_{name}.log")
    floor = measure.fetch_floor(path)
    out_dir = cache / f"report_{name}"
    shutil.rmtree(out_dir, ignore_errors=True)
    cli = measure.run_cli(path, out_dir)
    problems = [f"CLI exited {cli['exit_code']}: {cli['log']}"] if cli["exit_code"] != 0 else []
    if not problems:
        problems = measure.check_totals(out_dir / "report.json", expected)
    result: dict[str, Any] = {
        "size": name,
        "trace": str(path),
        "trace_mib": path.stat().st_size / 2**20,
        "reused_trace": reused,
        "generate_s": expected.get("generate_s"),
        "rows": expected["rows"],
        "floor": floor,
        "floor_s": sum(t["seconds"] for t in floor.values()),
        "floor_cpu_s": sum(t["cpu_s"] for t in floor.values()),
        "adbc": adbc,
        "cli": {k: v for k, v in cli.items() if k != "log"},
        "problems": problems,
    }
    result["ratio_to_floor"] = cli["wall_s"] / result["floor_s"] if result["floor_s"] else None
    result["ratio_to_adbc"] = cli["wall_s"] / adbc["seconds"] if adbc.get("seconds") else None
    cpu_floor = result["floor_cpu_s"]
    result["cpu_ratio_to_floor"] = cli["cpu_s"] / cpu_floor if cpu_floor else None
    if name == "large":
        result["missed"] = missed_targets(result, TARGET_FLOOR_RATIO, TARGET_TREE_MB, "ADBC")
    if breakdown:
        result["breakdown"] = measure.breakdown(path)
    return result


def missed_targets(r: dict[str, Any], ratio_t: float, tree_mb_t: float, floor: str) -> list[str]:
    """The targets `r` misses: wall time over ratio_t x the floor, process tree over tree_mb_t."""
    out = []
    ratio = r.get(f"ratio_to_{floor.lower()}")
    if ratio is None:
        out.append(f"{r['size']}: no {floor} floor measured ({r[floor.lower()].get('unavailable')})")
    elif ratio > ratio_t:
        out.append(f"{r['size']}: whole report {ratio:.2f}x the {floor} floor (target <= {ratio_t:g}x)")
    tree_mb = r["cli"]["peak_tree_rss_mib"] * 2**20 / 1e6
    if tree_mb > tree_mb_t:
        out.append(f"{r['size']}: process tree peak {tree_mb:,.0f} MB (target <= {tree_mb_t:,.0f} MB)")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=(*SIZES, *kineto_bench.SIZES), default="medium")
    ap.add_argument("--compare-sizes", action="store_true",
                    help="run medium and large and print the time ratio (target <= 12x)")
    ap.add_argument("--out", type=Path, help="keep traces and reports here; reuse matching traces")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the per-metric timings")
    ap.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--shared", action="store_true",
                    help="run the CLI on every shared real trace (wall time, report.json size)")
    ap.add_argument("--repeat", type=int, default=3, help="--shared: runs per trace (the best counts)")
    a = ap.parse_args(argv)
    if a.shared:
        found = shared.run(a.repeat)
        shared.print_results(found)
        if a.json:
            a.json.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
        for p in shared.problems(found):
            print(f"FAILURE: {p}", file=sys.stderr)
        return 1 if shared.problems(found) else 0
    names = ["medium", "large"] if a.compare_sizes else [a.size]
    cache = a.out or Path(tempfile.mkdtemp(prefix="nle-bench-"))
    cache.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for name in names:
            if name in kineto_bench.SIZES:
                res = kineto_bench.bench(name, cache)
                kineto_bench.print_result(res)
            else:
                res = bench(name, SIZES[name], cache, breakdown=not a.no_breakdown)
                print_result(res, TARGET_TREE_MB, TARGET_FLOOR_RATIO)
            results.append(res)
        if a.compare_sizes:
            print_comparison(results[0], results[1], TARGET_GROWTH)
    finally:
        if a.out is None and not a.keep:
            shutil.rmtree(cache, ignore_errors=True)
        elif a.out is None:
            print(f"kept {cache}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    failed = [p for r in results for p in r["problems"]]
    for p in failed:
        print(f"CORRECTNESS FAILURE: {p}", file=sys.stderr)
    missed = [m for r in results for m in r.get("missed", [])]
    for m in missed:
        print(f"TARGET MISSED: {m}", file=sys.stderr)
    return 1 if failed or missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
