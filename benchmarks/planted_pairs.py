"""Planted pairs: one workload written twice, with one bottleneck and with it removed.

Each pair checks a what-if: the step time the tool predicts from the first trace for the
change that removes the bottleneck must come within a tolerance of the step time measured
on the second. The simulator here is deliberately independent of the tool's replay: one
host thread issues CUDA calls with host work between them; each stream runs its work in
order, a task starting LATENCY_NS after its launch call began or GAP_NS after the task
before it ended (whichever is later); a synchronize returns WAKE_NS after its stream
drains; durations and host work carry lognormal jitter.

The workload: steps of LAYERS layers (norm, QKV GEMM, attention, output GEMM, norm,
gate/up GEMM, activation, down GEMM), each step ending with a synchronize, plus the planted
part:

- host_gaps: 45 us of host work before every launch; removed: none at all (what-if host);
- launch_bound: TINY_PER_LAYER extra 1 us kernels per layer, launched one by one;
  removed: each layer's kernels launched as one CUDA graph (what-if launch);
- copies: four 2 MiB pinned host-to-device copies per step on the compute stream;
  removed: on a side stream, overlapped with the kernels (what-if copies);
- readback: in the middle of every step a 4-byte device-to-host copy, a synchronize,
  and 300 us of host work using the value; removed: the copy and the host work without the
  synchronize (what-if readbacks);
- communication: an all-reduce after each layer on the compute stream; removed: on a
  communication stream of its own, overlapped (what-if communication);
- slow_gemm: the gate/up GEMM family 3x slower than it should be; removed: at its normal
  speed (what-if kernel:gate_up_gemm=3x).

    python benchmarks/planted_pairs.py --out DIR        # writes DIR/NAME.with.sqlite, NAME.without.sqlite
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.builder import TraceBuilder  # noqa: E402

US = 1_000
PID = 4242
COMPUTE, SIDE, COMM = 7, 13, 21
LATENCY_NS = 3_000
GAP_NS = 1_500
WAKE_NS = 2_500
LAUNCH_CALL_NS = 4_000
COPY_CALL_NS = 8_000
SYNC_CALL_NS = 1_500
HOST_GAP_NS = 2_000  # host work before each call in the base workload
STEP_GAP_NS = 60_000  # host work between steps (scheduling)
JITTER = 0.08
LAYERS = 6
TINY_PER_LAYER = 120
READBACK_USE_NS = 300_000
H2D, D2H, PINNED, DEVICE = 1, 2, 1, 2

NORM = "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)"
QKV = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
ATTN = "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t> >(Flash_fwd_params)"
OPROJ = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)"
GATE_UP = "gate_up_gemm_bf16_128x64_ldg8_stages_64x4_tn"
ACT = "void vllm::act_and_mul_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, int)"
DOWN = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize64x128x64_cublas"
TINY = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
LAYER = ((NORM, 9 * US), (QKV, 40 * US), (ATTN, 55 * US), (OPROJ, 30 * US), (NORM, 9 * US),
         (GATE_UP, 60 * US), (ACT, 12 * US), (DOWN, 45 * US))
STEP_RANGE = "step"  # the NVTX range around each step (--step-range step)
PAIRS = {
    "host_gaps": "host",
    "launch_bound": "launch",
    "copies": "copies",
    "readback": "readbacks",
    "communication": "communication",
    "slow_gemm": "kernel:gate_up_gemm=3x",
}


@dataclass
class Task:
    kind: str  # kernel, copy
    name: str
    dur: int
    stream: int
    copy_kind: int = 0
    nbytes: int = 0


class Sim:
    """One host thread, streams in order; writes every row into the builder."""

    def __init__(self, b: TraceBuilder, rng: np.random.Generator) -> None:
        self.b, self.rng = b, rng
        self.host = 1_000_000
        self.free: dict[int, int] = {}
        self.corr = 1

    def j(self, ns: float) -> int:
        return max(1, int(round(ns * self.rng.lognormal(0.0, JITTER))))

    def work(self, ns: float) -> None:
        if ns > 0:
            self.host += self.j(ns)

    def _call(self, name: str, ns: float) -> tuple[int, int, int]:
        c0, corr = self.host, self.corr
        self.corr += 1
        c1 = c0 + self.j(ns)
        self.b.runtime(c0, c1, pid=PID, corr=corr, name=name)
        self.host = c1
        return c0, c1, corr

    def _place(self, t: Task, call_start: int, corr: int, node: int | None = None) -> int:
        start = max(call_start + LATENCY_NS, self.free.get(t.stream, 0) + GAP_NS)
        end = start + self.j(t.dur)
        self.free[t.stream] = end
        if t.kind == "kernel":
            self.b.kernel(start, end, pid=PID, stream=t.stream, corr=corr, name=t.name,
                          graph_node_id=node, graph_id=1 if node is not None else None)
        else:
            self.b.memcpy(start, end, bytes=t.nbytes, copy_kind=t.copy_kind, pid=PID, stream=t.stream, corr=corr,
                          src_kind=PINNED if t.copy_kind == H2D else DEVICE,
                          dst_kind=DEVICE if t.copy_kind == H2D else PINNED)
        return end

    def launch(self, t: Task) -> None:
        c0, _, corr = self._call("cudaLaunchKernel_v7000", LAUNCH_CALL_NS)
        self._place(t, c0, corr)

    def graph(self, tasks: list[Task]) -> None:
        c0, _, corr = self._call("cudaGraphLaunch_v10000", LAUNCH_CALL_NS)
        for n, t in enumerate(tasks):
            self._place(t, c0, corr, node=100 + n)

    def copy(self, t: Task) -> None:
        c0, _, corr = self._call("cudaMemcpyAsync_v3020", COPY_CALL_NS)
        self._place(t, c0, corr)

    def sync(self, stream: int) -> None:
        c0, corr = self.host, self.corr
        self.corr += 1
        c1 = max(c0 + self.j(SYNC_CALL_NS), self.free.get(stream, 0) + self.j(WAKE_NS))
        self.b.runtime(c0, c1, pid=PID, corr=corr, name="cudaStreamSynchronize_v3020")
        self.b.sync(c0 + 100, c1 - 100, pid=PID, stream=stream, corr=corr, sync_type=3)
        self.host = c1


def generate(name: str, planted: bool, path: Path, steps: int = 40, seed: int = 0) -> None:
    """Write one trace of the pair `name` (planted: with the bottleneck)."""
    if name not in PAIRS:
        raise ValueError(f"unknown pair {name!r}: {', '.join(PAIRS)}")
    b = TraceBuilder("2024.6")
    b.process(PID)
    b.gpu(0, name="NVIDIA H100 80GB HBM3", sm_count=132)
    rng = np.random.default_rng([seed, sorted(PAIRS).index(name), int(planted)])
    sim = Sim(b, rng)
    host_gap = 0.0 if (name == "host_gaps" and not planted) else 45 * US if name == "host_gaps" else HOST_GAP_NS
    for _ in range(steps):
        sim.work(STEP_GAP_NS if not (name == "host_gaps" and not planted) else 0)
        begin = sim.host
        _step(sim, name, planted, host_gap)
        b.nvtx(begin, sim.host, text=STEP_RANGE, pid=PID)
    path.unlink(missing_ok=True)
    b.write(path)


def _step(sim: Sim, name: str, planted: bool, host_gap: float) -> None:
    if name == "copies":
        stream = COMPUTE if planted else SIDE
        for _ in range(4):
            sim.work(host_gap)
            sim.copy(Task("copy", "", 110 * US, stream, H2D, 2 << 20))
    for layer in range(LAYERS):
        tasks = [Task("kernel", n, d, COMPUTE) for n, d in LAYER]
        if name == "slow_gemm" and planted:
            tasks = [Task(t.kind, t.name, t.dur * 3 if t.name == GATE_UP else t.dur, t.stream) for t in tasks]
        if name == "launch_bound":
            tasks = tasks + [Task("kernel", TINY, 1 * US, COMPUTE) for _ in range(TINY_PER_LAYER)]
        if name == "launch_bound" and not planted:
            sim.work(host_gap)
            sim.graph(tasks)
        else:
            for t in tasks:
                sim.work(host_gap)
                sim.launch(t)
        if name == "communication":
            sim.work(host_gap)
            sim.launch(Task("kernel", ALLREDUCE, 70 * US, COMPUTE if planted else COMM))
        if name == "readback" and layer == LAYERS // 2 - 1:
            sim.work(host_gap)
            sim.copy(Task("copy", "", 2 * US, COMPUTE, D2H, 4))
            if planted:
                sim.work(host_gap)
                sim.sync(COMPUTE)
            sim.work(READBACK_USE_NS)  # the host uses the value it read
    sim.work(host_gap)
    sim.sync(COMPUTE)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--pair", choices=sorted(PAIRS), action="append")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    for name in a.pair or PAIRS:
        for planted in (True, False):
            generate(name, planted, a.out / f"{name}.{'with' if planted else 'without'}.sqlite", a.steps)
    print(json.dumps({name: PAIRS[name] for name in a.pair or PAIRS}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
