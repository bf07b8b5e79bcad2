"""Scale of `fleet`: time per trace and coordinator memory as the number of rank files grows.

Generates one rank set (fleet_synth.py, --kernels per rank) once, then runs fleet on its
first N files for each N, in local mode with --jobs (default: all cores), without the
cache, each N in a fresh coordinating process. Reports wall time, seconds per trace
(wall x jobs / N: flat when the pool keeps every core busy and nothing grows with N), the
coordinating process's peak RSS (its workers are separate processes), and how long
combining the summaries took.

    python benchmarks/fleet_scale.py --dir /tmp/fleet64 --ranks 64 --kernels 100000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.fleet_synth import FleetConfig, generate, step_ops  # noqa: E402
from nsys_llm_explainer import fleet  # noqa: E402
from nsys_llm_explainer.fleet import inputs  # noqa: E402
from nsys_llm_explainer.runtime.machine import usable_cpus  # noqa: E402


def ensure_set(directory: Path, ranks: int, kernels: int) -> dict[str, object]:
    layers = 32
    steps = max(1, round(kernels / len(step_ops(layers))))
    cfg = FleetConfig(ranks=ranks, steps=steps, layers=layers, straggler=ranks // 3,
                      slow_collectives=(100, 2000))
    marker = directory / "expected.json"
    if marker.is_file():
        truth = json.loads(marker.read_text())
        if truth["config"]["ranks"] == ranks and truth["config"]["steps"] == steps:
            return {"generated": False, "kernels_per_rank": truth["kernels_per_rank"]}
    t0 = time.perf_counter()
    truth = generate(cfg, directory)
    return {"generated": True, "generate_s": round(time.perf_counter() - t0, 1),
            "kernels_per_rank": truth["kernels_per_rank"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--kernels", type=int, default=100_000)
    ap.add_argument("--counts", default="8,16,32,64")
    ap.add_argument("--jobs", type=int, default=usable_cpus())  # as fleet does without --jobs
    ap.add_argument("--measure", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.measure:
        print(json.dumps(measure(str(a.dir), a.measure, a.jobs)), flush=True)
        return 0
    info = ensure_set(a.dir, a.ranks, a.kernels)
    print(json.dumps({"set": str(a.dir), **info, "jobs": a.jobs}), flush=True)
    for n in [int(x) for x in a.counts.split(",")]:
        # A fresh coordinating process per N: its peak RSS is this N's alone.
        cmd = [sys.executable, __file__, "--dir", str(a.dir), "--ranks", str(a.ranks), "--kernels",
               str(a.kernels), "--jobs", str(a.jobs), "--measure", str(n)]
        subprocess.run(cmd, check=True)
    return 0


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM of /proc/self/status (its own address space;
    ru_maxrss on Linux also keeps the peak of the process it was forked from across exec, such
    as a parent that has just generated the set), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(directory: str, n: int, jobs: int) -> dict[str, object]:
    files = inputs.collect([directory], [], None)[:n]
    t0 = time.perf_counter()
    result = fleet.run(files, jobs=jobs, use_cache=False)
    wall = time.perf_counter() - t0
    rss = peak_rss_mb()
    per = [t["seconds"] for t in result.timing["traces"]]
    run = result.doc["runs"][0]
    return {
        "traces": n, "wall_s": round(wall, 1), "per_trace_s": round(wall * jobs / n, 2),
        "worker_s_mean": round(sum(per) / len(per), 2), "combine_s": result.timing["combine_s"],
        "coordinator_peak_rss_mb": round(rss), "headline_rank": run["headline"]["rank"],
        "stragglers": [s["rank"] for s in run["stragglers"].get("stragglers", [])],
        "matched_collectives": run["collectives"].get("matched"),
    }


if __name__ == "__main__":
    raise SystemExit(main())
