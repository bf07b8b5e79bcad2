"""Write a multi-rank trace set: one Nsight Systems export per rank of a tensor-parallel job,
with a planted straggler, planted slow collectives and known clock offsets, plus the truth.

Every rank runs the same steps: per layer QKV GEMM, attention, output GEMM, all-reduce, MLP
GEMMs, activation, all-reduce; an embedding before and the LM head after. A collective
starts on a rank when that rank reaches it (its arrival) and ends on every rank when the
last one has arrived plus its transfer time (ends differ by under END_JITTER_NS). The
straggler's GEMMs take `straggler_factor` times longer, so it arrives last at every
collective; the planted slow collectives take `slow_factor` times the normal transfer.

Clocks: each rank's capture started at its own time S_r (its timestamps count from there),
and its export records S_r + e_r as TARGET_INFO_SESSION_START_TIME.utcEpochNs, where e_r
is a wall-clock error of up to `clock_error_ns` (NTP-like). The sidecar expected.json holds
the generator's own bookkeeping: true arrivals and ends of every collective per rank, the
clock errors, the planted ranks and collectives.

    python benchmarks/fleet_synth.py --ranks 16 --out /tmp/tp16
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import catalog as cat  # noqa: E402
from benchmarks.writer import insert_arrays  # noqa: E402
from tests.fixtures.builder import TraceBuilder, gpid, gtid  # noqa: E402

GENERATOR_VERSION = 1
T_BASE = 1_760_000_000_000_000_000  # wall clock (UTC epoch ns) of the job start
FIRST_EVENT_NS = 2_000_000_000  # work starts 2 s after the earliest capture start
COMPUTE_STREAM, COMM_STREAM = 7, 13
LAUNCH_SPACING_NS = 5_000
LAUNCH_CALL_NS = 3_000
LAUNCH_LATENCY_NS = 4_000
KERNEL_GAP_NS = 1_000
SYNC_WAKE_NS = 3_000
STEP_GAP_NS = 150_000
ALLREDUCE_NS = 30_000
END_JITTER_NS = 300
JITTER = 0.05
PID_BASE = 50_000
GEMMS = frozenset({cat.QKV, cat.OPROJ, cat.GATE_UP})
SET_EXPECTED = "expected.json"


@dataclass(frozen=True)
class FleetConfig:
    ranks: int = 8
    steps: int = 20
    layers: int = 4
    straggler: int | None = 3
    straggler_factor: float = 1.3
    slow_collectives: tuple[int, ...] = (5, 17)  # ordinals of all-reduces planted slow
    slow_factor: float = 6.0
    clock_error_ns: int = 300_000
    seed: int = 0
    version: str = "2024.6"
    start_spread_ns: int = 40_000_000  # captures start up to this far apart
    extra: dict[str, object] = field(default_factory=dict)


def step_ops(layers: int) -> list[str]:
    """Kernel names of one step in issue order; "" marks an all-reduce."""
    ops = [cat.EMBED]
    for _ in range(layers):
        ops += [cat.QKV, cat.ATTN_DECODE, cat.OPROJ, "", cat.GATE_UP, cat.SILU, cat.OPROJ, ""]
    return ops + [cat.GATE_UP, cat.SOFTMAX]


def _durations(cfg: FleetConfig, rng: np.random.Generator, names: list[str]) -> np.ndarray:
    """ranks x ops nominal durations with jitter; the straggler's GEMMs slowed."""
    base = np.array([max(cat.kernel_ns(n, False), 6_000) if n else 0 for n in names], dtype=np.float64)
    d = base[None, :] * rng.lognormal(0.0, JITTER, size=(cfg.ranks, len(names)))
    if cfg.straggler is not None:
        gemm = np.array([n in GEMMS for n in names])
        d[cfg.straggler, gemm] *= cfg.straggler_factor
    return np.rint(d).astype(np.int64)


def simulate(cfg: FleetConfig) -> dict[str, np.ndarray]:
    """Global-clock times of every op of every rank (ranks x ops over all steps)."""
    rng = np.random.default_rng(cfg.seed)
    names = step_ops(cfg.layers)
    per_step = len(names)
    total = per_step * cfg.steps
    start = np.zeros((cfg.ranks, total), dtype=np.int64)
    end = np.zeros((cfg.ranks, total), dtype=np.int64)
    host = np.full(cfg.ranks, T_BASE + FIRST_EVENT_NS) + rng.integers(0, 20_000, cfg.ranks)
    step_host = np.zeros((cfg.ranks, cfg.steps), dtype=np.int64)
    sync_end = np.zeros((cfg.ranks, cfg.steps), dtype=np.int64)
    coll_ordinal = 0
    for s in range(cfg.steps):
        dur = _durations(cfg, rng, names)
        step_host[:, s] = host
        t = host + LAUNCH_LATENCY_NS + LAUNCH_CALL_NS  # first kernel ready
        for j, name in enumerate(names):
            col = s * per_step + j
            if name:
                start[:, col] = t
                end[:, col] = t + dur[:, j]
                t = end[:, col] + KERNEL_GAP_NS
                continue
            arrival = t
            transfer = ALLREDUCE_NS * rng.lognormal(0.0, JITTER)
            if coll_ordinal in cfg.slow_collectives:
                transfer *= cfg.slow_factor
            done = int(arrival.max() + round(transfer))
            start[:, col] = arrival
            end[:, col] = done + rng.integers(0, END_JITTER_NS, cfg.ranks)
            t = end[:, col] + KERNEL_GAP_NS
            coll_ordinal += 1
        last = end[:, (s + 1) * per_step - 1]
        sync_end[:, s] = last + SYNC_WAKE_NS
        host = sync_end[:, s] + np.rint(STEP_GAP_NS * rng.lognormal(0.0, JITTER, cfg.ranks)).astype(np.int64)
    is_coll = np.tile(np.array([not n for n in names]), cfg.steps)
    return {"start": start, "end": end, "is_coll": is_coll, "step_host": step_host, "sync_end": sync_end,
            "names": np.array(names * cfg.steps, dtype=object)}


def _write_rank(cfg: FleetConfig, r: int, sim: dict[str, np.ndarray], origin_true: int, recorded: int,
                path: Path) -> int:
    pid = PID_BASE + 13 * r
    b = TraceBuilder(cfg.version)
    b.process(pid, "python3")
    b.thread_name(pid, pid, f"rank{r}")
    b.gpu(r % 8, name="NVIDIA H100 80GB HBM3", sm_count=132)
    b.session_start(recorded)
    names = sim["names"]
    n = len(names)
    coll = sim["is_coll"]
    kname = np.where(coll, cat.ALLREDUCE, names)
    ids = {x: b.string(x) for x in set(kname.tolist())}
    short = {x: b.string(cat.short_of(x)) for x in ids}
    launch = b.string("cudaLaunchKernel_v7000")
    sync_api = b.string("cudaStreamSynchronize_v3020")
    per_step = n // cfg.steps
    pos = np.tile(np.arange(per_step), cfg.steps)
    step_of = np.repeat(np.arange(cfg.steps), per_step)
    host = sim["step_host"][r][step_of] + pos * LAUNCH_SPACING_NS
    corr = np.arange(1, n + 1, dtype=np.int64)
    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    b.write(tmp)
    import sqlite3

    con = sqlite3.connect(tmp, isolation_level=None)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    off = origin_true  # local timestamp = global - capture start
    try:
        con.execute("BEGIN")
        insert_arrays(con, cfg.version, "CUPTI_ACTIVITY_KIND_KERNEL", {
            "start": sim["start"][r] - off, "end": sim["end"][r] - off, "deviceId": r % 8, "contextId": 1,
            "streamId": np.where(coll, COMM_STREAM, COMPUTE_STREAM).astype(np.int64), "correlationId": corr,
            "globalPid": gpid(pid), "demangledName": np.array([ids[x] for x in kname], dtype=np.int64),
            "shortName": np.array([short[x] for x in kname], dtype=np.int64),
            "launchType": 1, "cacheConfig": 0, "registersPerThread": 32, "gridX": 128, "gridY": 1, "gridZ": 1,
            "blockX": 128, "blockY": 1, "blockZ": 1, "gridId": corr,
        })
        steps = cfg.steps
        sync_start = sim["step_host"][r] + per_step * LAUNCH_SPACING_NS
        insert_arrays(con, cfg.version, "CUPTI_ACTIVITY_KIND_RUNTIME", {
            "start": np.r_[host, sync_start] - off,
            "end": np.r_[host + LAUNCH_CALL_NS, sim["sync_end"][r]] - off,
            "eventClass": 0, "globalTid": gtid(pid, pid),
            "correlationId": np.r_[corr, n + 1 + np.arange(steps)],
            "nameId": np.r_[np.full(n, launch), np.full(steps, sync_api)].astype(np.int64), "returnValue": 0,
        })
        insert_arrays(con, cfg.version, "NVTX_EVENTS", {
            "start": sim["step_host"][r] - off, "end": sim["sync_end"][r] - off, "eventType": 59,
            "text": np.array(["train_step"] * steps, dtype=object), "globalTid": gtid(pid, pid), "domainId": 0,
        })
        con.execute("COMMIT")
    finally:
        con.close()
    tmp.replace(path)
    return n


def generate(cfg: FleetConfig, out_dir: Path) -> dict[str, object]:
    """Write report_<rank>.sqlite for every rank into out_dir and expected.json; return the truth."""
    t0 = time.perf_counter()
    if cfg.straggler is not None and not 0 <= cfg.straggler < cfg.ranks:
        raise ValueError(f"straggler {cfg.straggler} is not one of the {cfg.ranks} ranks")
    out_dir.mkdir(parents=True, exist_ok=True)
    sim = simulate(cfg)
    rng = np.random.default_rng([cfg.seed, 1])
    origin = T_BASE + rng.integers(0, cfg.start_spread_ns, cfg.ranks)
    err = rng.integers(-cfg.clock_error_ns, cfg.clock_error_ns + 1, cfg.ranks)
    kernels = 0
    for r in range(cfg.ranks):
        kernels += _write_rank(cfg, r, sim, int(origin[r]), int(origin[r] + err[r]), out_dir / f"report_{r}.sqlite")
    c = sim["is_coll"]
    arrival = (sim["start"][:, c] - T_BASE).T  # collectives x ranks
    ends = (sim["end"][:, c] - T_BASE).T
    truth = {
        "generator_version": GENERATOR_VERSION,
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
        "files": [f"report_{r}.sqlite" for r in range(cfg.ranks)],
        "kernels_per_rank": kernels // cfg.ranks,
        "straggler": cfg.straggler,
        "slow_collectives": [{"kind": "AllReduce", "stream_ordinal": 0, "index": int(i)}
                             for i in cfg.slow_collectives if i < arrival.shape[0]],
        "clock_error_ns": err.tolist(),
        "expected_correction_ns": (int(err[0]) - err).tolist(),  # what refinement must add per rank
        "collective_arrival_ns": arrival.tolist(),
        "collective_end_ns": ends.tolist(),
        "step_compute_ns": [
            [int(x) for x in np.add.reduceat(
                np.where(c, 0, sim["end"][r] - sim["start"][r]), np.arange(0, len(c), len(c) // cfg.steps))]
            for r in range(cfg.ranks)
        ],
        "generate_s": round(time.perf_counter() - t0, 2),
    }
    (out_dir / SET_EXPECTED).write_text(json.dumps(truth) + "\n", encoding="utf-8")
    return truth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="directory for report_<rank>.sqlite")
    ap.add_argument("--ranks", type=int, default=FleetConfig.ranks)
    ap.add_argument("--steps", type=int, default=FleetConfig.steps)
    ap.add_argument("--layers", type=int, default=FleetConfig.layers)
    ap.add_argument("--straggler", type=int, default=FleetConfig.straggler)
    ap.add_argument("--straggler-factor", type=float, default=FleetConfig.straggler_factor)
    ap.add_argument("--seed", type=int, default=FleetConfig.seed)
    a = ap.parse_args(argv)
    cfg = FleetConfig(a.ranks, a.steps, a.layers, a.straggler if a.straggler >= 0 else None,
                      a.straggler_factor, seed=a.seed)
    truth = generate(cfg, a.out)
    print(json.dumps({k: truth[k] for k in ("kernels_per_rank", "straggler", "generate_s")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
