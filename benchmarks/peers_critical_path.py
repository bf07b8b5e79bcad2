"""The critical path side by side with Holistic Trace Analysis' critical path analysis, on
the shared PyTorch profiler traces (docs/peers.md explains each difference).

    python benchmarks/peers_critical_path.py --hta-python /path/to/hta-venv/bin/python [--json OUT]

HTA runs in its own virtual environment (benchmarks/peers_hta_critical_path.py); this
script runs nsys-llm-explain's critical_path metric on the same window: a ProfilerStep
instance where the trace has them (the same step), else the whole trace. Both paths are
split into the same five classes, HTA's `bound_by` names:

- cpu_bound: host time on the path (ours: host work, runtime/launch/synchronize/copy call
  time; HTA: operator and runtime-call time; host time between top-level operators and
  blocking calls weigh nothing in HTA's graph);
- gpu_compute_bound: kernels, copies and memsets (communication apart);
- gpu_communication_bound: collectives;
- gpu_kernel_kernel_overhead: gaps between work on a stream (ours: queue gaps and waits no
  recorded dependency explains);
- gpu_kernel_launch_overhead: launch latency;
plus ours alone: `sync_return` (a blocking call returning after its work, weightless in HTA)
and `before_window` (work queued before the step).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsys_llm_explainer.graph import path as P  # noqa: E402
from nsys_llm_explainer.metrics import (  # noqa: E402
    Context,  # noqa: E402
    critical_path,
    steps,
)
from nsys_llm_explainer.model import Skipped  # noqa: E402
from nsys_llm_explainer.options import Options  # noqa: E402
from nsys_llm_explainer.trace import formats  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces" / "kineto"
CASES = (
    ("hf_qwen1.5_0.5b_h100.json.gz", "ProfilerStep", [0]),
    ("hta_a100_80gb_rank0.json.gz", "ProfilerStep", [0, 1, 2, 3, 4]),
    ("hta_alexnet_a100.json.gz", "", [None]),
)
CLASSES = ("cpu_bound", "gpu_compute_bound", "gpu_communication_bound", "gpu_kernel_kernel_overhead",
           "gpu_kernel_launch_overhead", "sync_return", "before_window")


def _ours(path: Path, whole: bool) -> dict[str, Any]:
    data = formats.open_trace(path, jobs=1)
    try:
        ctx = Context(data.schema, data, Options())
        ctx.results["steps"] = Skipped("steps", "whole trace") if whole else steps.METRIC.run(ctx)
        out = critical_path.METRIC.run(ctx)
        res, pieces, _, _ = critical_path.analysis(ctx)
        per_step: list[dict[str, float]] = []
        for b in range(len(res.measured)):
            mine = pieces.block == b
            split = dict.fromkeys(CLASSES, 0.0)
            for kind, piece, ns in zip(pieces.kind[mine].tolist(), pieces.piece[mine].tolist(),
                                       pieces.ns[mine].tolist(), strict=True):
                split[_class(kind, piece)] += ns / 1e3
            per_step.append(split)
        return {"steps": [int(s) for s in res.plan.step.tolist()], "measured_us": [m / 1e3 for m in res.measured.tolist()],
                "split_us": per_step, "error_pct": getattr(out, "data", {}).get("replay_error_pct")}
    finally:
        data.close()


def _class(kind: int, piece: int) -> str:
    from nsys_llm_explainer.graph.path import KINDS

    k = KINDS[kind]
    if piece == P.RETURN:
        return "sync_return"
    if piece == P.LATENCY:
        return "gpu_kernel_launch_overhead"
    if k in ("gpu_gap", "unexplained"):
        return "gpu_kernel_kernel_overhead"
    if k == "carried":
        return "before_window"
    if k == "communication":
        return "gpu_communication_bound"
    if piece == P.TASK:
        return "gpu_compute_bound"
    return "cpu_bound"


def _hta(python: str, path: Path, annotation: str, instance: int | None) -> dict[str, Any]:
    args = [python, str(ROOT / "benchmarks" / "peers_hta_critical_path.py"), str(path)]
    if annotation:
        args += [annotation, str(instance)]
    run = subprocess.run(args, capture_output=True, text=True, timeout=1800, cwd=ROOT / "benchmarks")
    return json.loads(run.stdout) if run.stdout.strip() else {"errors": {"run": run.stderr[-500:]}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hta-python", required=True, help="python of a venv with holistictraceanalysis")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    results = []
    for name, annotation, instances in CASES:
        path = TRACES / name
        if not path.exists():
            print(f"skipped {name}: not found at {path}")
            continue
        ours = _ours(path, whole=not annotation)
        for i, inst in enumerate(instances):
            hta = _hta(a.hta_python, path, annotation, inst)
            row = {"trace": name, "window": f"{annotation}#{inst}" if annotation else "whole trace",
                   "hta_path_us": hta.get("path_us"), "hta_us": {c: hta.get("bound_by", {}).get(c, 0.0) for c in CLASSES},
                   "ours_step_us": ours["measured_us"][i] if i < len(ours["measured_us"]) else None,
                   "ours_us": ours["split_us"][i] if i < len(ours["split_us"]) else {},
                   "hta_top": hta.get("top", [])[:5], "hta_errors": hta.get("errors")}
            results.append(row)
            print(f"\n{name} {row['window']}: HTA path {row['hta_path_us']} us, ours step {row['ours_step_us']} us")
            print(f"  {'class':28s} {'HTA us':>12s} {'ours us':>12s}")
            for c in CLASSES:
                print(f"  {c:28s} {row['hta_us'].get(c, 0.0):12.0f} {row['ours_us'].get(c, 0.0):12.0f}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
