"""Write large, realistic vLLM-like Nsight Systems exports, with their expected totals.

Each process drives its own GPU (tensor parallelism: NCCL all-reduce in every layer when
there are several). Its launch thread pushes nested NVTX ranges (step > layer_N > op),
launches kernels with cudaLaunchKernel (or a whole decode step with one cudaGraphLaunch),
copies inputs in and sampled tokens out, and blocks on cudaStreamSynchronize every step.
Correlation ids count from 1 in every process, so they collide across processes as in
real multi-process captures.

The expected totals (kernel ns, per-device busy ns from the generator's own interval
bookkeeping, NVTX-attributed kernel ns) go into a sidecar JSON next to the trace.

    python benchmarks/synth.py --kernels 500000 --out /tmp/medium.sqlite
    python benchmarks/synth.py --plant copies [--without] --out /tmp/copies.sqlite
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import catalog as cat  # noqa: E402
from benchmarks.assemble import Rows, assemble  # noqa: E402
from benchmarks.planted_pairs import PAIRS  # noqa: E402
from benchmarks.planted_pairs import generate as generate_pair  # noqa: E402
from benchmarks.timeline import Template, compile_template, simulate_step, step_events  # noqa: E402
from benchmarks.writer import insert_arrays  # noqa: E402
from tests.fixtures.builder import TraceBuilder  # noqa: E402

GENERATOR_VERSION = 2  # bump when the output for a given config changes (invalidates caches)
PID_BASE = 41_230
PID_STRIDE = 117
T0_NS = 1_000_000_000


@dataclass(frozen=True)
class SynthConfig:
    kernels: int = 20_000  # approximate: whole steps are generated
    processes: int = 2
    layers: int = 32
    graph: bool = False  # decode steps as one cudaGraphLaunch each (prefill stays eager)
    nvtx_depth: int = 3  # 1: step ranges; 2: + layer_N; 3: + attention/mlp
    prefill_every: int = 16  # one prefill step, then decode steps
    seed: int = 0
    version: str = "2024.6"
    gpu_name: str = "NVIDIA H100 80GB HBM3"
    # Planted changes, for before/after pairs of one workload (diff): every GEMM's duration,
    # the all-reduce's duration, and all host time outside CUDA API calls, multiplied.
    gemm_scale: float = 1.0
    comm_scale: float = 1.0
    host_scale: float = 1.0

    def sidecar_key(self) -> dict[str, object]:
        return {"generator_version": GENERATOR_VERSION, **asdict(self)}


def sidecar_path(trace: Path) -> Path:
    return trace.with_name(trace.name + ".expected.json")


GEMMS = frozenset({cat.QKV, cat.OPROJ, cat.GATE_UP})


def _planted(t: Template, cfg: SynthConfig) -> Template:
    scale = np.array([cfg.gemm_scale if k in GEMMS else cfg.comm_scale if k == cat.ALLREDUCE else 1.0
                      for k in t.op_kernel])
    if (scale == 1.0).all():
        return t
    return dataclasses.replace(t, base_ns=np.rint(t.base_ns * scale).astype(np.int64))


def _templates(cfg: SynthConfig) -> tuple[Template, Template]:
    tp = cfg.processes > 1
    pre = compile_template(step_events(cfg.layers, tp, True, False, cfg.nvtx_depth), True)
    dec = compile_template(step_events(cfg.layers, tp, False, cfg.graph, cfg.nvtx_depth), False)
    return _planted(pre, cfg), _planted(dec, cfg)


def steps_for(cfg: SynthConfig, pre: Template, dec: Template) -> int:
    def count(t: Template) -> int:
        return int(sum(1 for k in t.op_kernel if k))

    per_cycle = count(pre) + (cfg.prefill_every - 1) * count(dec)
    per_step = per_cycle / cfg.prefill_every
    return max(1, round(cfg.kernels / cfg.processes / per_step))


def simulate_process(cfg: SynthConfig, p: int, pre: Template, dec: Template, steps: int) -> Rows:
    """Host and device times of every step of process `p`, grouped by template."""
    rng = np.random.default_rng([cfg.seed, p])
    rows = Rows(p, PID_BASE + PID_STRIDE * p, (pre, dec))
    host = T0_NS + int(rng.integers(0, 50_000))
    frontier = host
    corr = 1
    for i in range(steps):
        pos = i % cfg.prefill_every
        t = pre if pos == 0 else dec
        scale = 1.0 + pos / cfg.prefill_every
        out = simulate_step(t, rng, host, frontier, scale, cfg.host_scale)
        rows.add(0 if pos == 0 else 1, out, corr)
        corr += len(t.api_events)
        gap = int(rng.integers(cat.STEP_GAP_NS // 2, 2 * cat.STEP_GAP_NS))
        host = out.next_host + int(round(gap * cfg.host_scale))
        frontier = out.next_frontier
    return rows


def generate(cfg: SynthConfig, path: Path, sidecar: bool = True) -> dict[str, object]:
    """Write the export at `path` (replacing it) and, unless told not to, its sidecar
    JSON of expected totals; return those totals."""
    t0 = time.perf_counter()
    pre, dec = _templates(cfg)
    steps = steps_for(cfg, pre, dec)
    b = TraceBuilder(cfg.version)
    for p in range(cfg.processes):
        pid = PID_BASE + PID_STRIDE * p
        b.process(pid, "python3")
        b.thread_name(pid, pid, f"VllmWorker-{p}" if cfg.processes > 1 else "python3")
        b.gpu(p, name=cfg.gpu_name, sm_count=132 if "H100" in cfg.gpu_name else 108)
    procs = [simulate_process(cfg, p, pre, dec, steps) for p in range(cfg.processes)]
    tables = assemble(b, cfg, procs)
    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    b.write(tmp)
    con = _fast_connection(tmp)
    try:
        con.execute("BEGIN")
        counts = {name: insert_arrays(con, cfg.version, name, vals, nullable)
                  for name, (vals, nullable) in tables.items.items()}
        con.execute("COMMIT")
    finally:
        con.close()
    os.replace(tmp, path)
    expected = {**cfg.sidecar_key(), "steps_per_process": steps, "rows": counts,
                **tables.expected, "generate_s": round(time.perf_counter() - t0, 2)}
    if sidecar:
        sidecar_path(path).write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    return expected


def _fast_connection(path: Path):  # type: ignore[no-untyped-def]
    import sqlite3

    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute("PRAGMA cache_size = -262144")
    return con


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="trace path to write (replaced)")
    ap.add_argument("--kernels", type=int, default=SynthConfig.kernels)
    ap.add_argument("--processes", type=int, default=SynthConfig.processes)
    ap.add_argument("--layers", type=int, default=SynthConfig.layers)
    ap.add_argument("--graph", action="store_true", help="decode steps as CUDA graph launches")
    ap.add_argument("--nvtx-depth", type=int, choices=(1, 2, 3), default=SynthConfig.nvtx_depth)
    ap.add_argument("--prefill-every", type=int, default=SynthConfig.prefill_every)
    ap.add_argument("--seed", type=int, default=SynthConfig.seed)
    ap.add_argument("--version", default=SynthConfig.version)
    ap.add_argument("--gpu-name", default=SynthConfig.gpu_name)
    ap.add_argument("--gemm-scale", type=float, default=1.0, help="planted: GEMM durations x this")
    ap.add_argument("--comm-scale", type=float, default=1.0, help="planted: all-reduce durations x this")
    ap.add_argument("--host-scale", type=float, default=1.0,
                    help="planted: host time outside CUDA calls x this")
    ap.add_argument("--plant", choices=sorted(PAIRS),
                    help="write instead one trace of a planted pair (benchmarks/planted_pairs.py): the "
                         "workload with this bottleneck, or with --without the same workload without it")
    ap.add_argument("--without", action="store_true", help="with --plant: the trace without the bottleneck")
    ap.add_argument("--steps", type=int, default=40, help="with --plant: steps to write")
    a = ap.parse_args(argv)
    if a.plant:
        generate_pair(a.plant, not a.without, a.out, steps=a.steps, seed=a.seed)
        print(json.dumps({"plant": a.plant, "bottleneck": not a.without, "what_if": PAIRS[a.plant]}))
        return 0
    cfg = SynthConfig(a.kernels, a.processes, a.layers, a.graph, a.nvtx_depth, a.prefill_every,
                      a.seed, a.version, a.gpu_name, a.gemm_scale, a.comm_scale, a.host_scale)
    exp = generate(cfg, a.out)
    print(json.dumps({k: exp[k] for k in ("rows", "kernel_ns", "attributed_ns", "generate_s")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
