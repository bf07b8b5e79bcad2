"""Write a large PyTorch profiler (Kineto) trace, with its expected totals in a sidecar.

One training-like process on one GPU. Each ProfilerStep#N runs an eager part (per layer:
aten::linear > aten::addmm launching a GEMM, aten::layer_norm > aten::native_layer_norm,
aten::_scaled_dot_product_flash_attention, aten::gelu, aten::add, each launching one kernel
with cudaLaunchKernel, plus ac2g flow events), then a decode part of CUDA-graph launches
(many node kernels per cudaGraphLaunch, outside any operator), an NCCL all-reduce on a
second stream that overlaps compute, a pageable copy and a blocking cudaStreamSynchronize.
Timestamps are epoch microseconds with nanosecond decimals, as recent PyTorch writes them.

The sidecar holds totals from the generator's own bookkeeping: kernel ns, per-device busy
ns (union of kernel intervals), NVTX-attributed kernel ns, event counts, and kernel ns per
innermost operator.

    python benchmarks/kineto_synth.py --mb 1000 --out /tmp/big.pt.trace.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

GENERATOR_VERSION = 1
PID = 31_337
BASE_NS = 1_700_000_000_000_000_000
GEMM = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
        "execute_segment_k_off_kernel__5x_cublas")
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, floa"
    "t, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)
FLASH = (
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass:"
    ":bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false,"
    " true, true, false, false>(pytorch_flash::Flash_fwd_params)"
)
GELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorB"
    "ase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{la"
    "mbda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorItera"
    "torBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const:"
    ":{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::a"
    "rray<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
NODE = "void decode_graph_node_kernel<64>(float const*, float*, int)"
# (outer op or None, inner op, kernel, kernel ns, input dims)
LEAVES = (
    ("aten::linear", "aten::addmm", GEMM, 41_000, "[[4096], [2048, 4096], [4096, 4096], [], []]"),
    ("aten::layer_norm", "aten::native_layer_norm", LAYER_NORM, 6_500, "[[2048, 4096], [], [4096], [4096], []]"),
    (None, "aten::_scaled_dot_product_flash_attention", FLASH, 58_000,
     "[[8, 32, 256, 128], [8, 32, 256, 128], [8, 32, 256, 128]]"),
    (None, "aten::gelu", GELU, 9_000, "[[2048, 16384]]"),
    (None, "aten::add", ADD, 4_000, "[[2048, 4096], [2048, 4096], []]"),
)


@dataclass(frozen=True)
class KinetoConfig:
    mb: int = 1000  # approximate uncompressed size; whole steps are written
    layers: int = 48
    graph_launches: int = 16  # per step
    nodes_per_graph: int = 40

    def sidecar_key(self) -> dict[str, object]:
        return {"generator_version": GENERATOR_VERSION, **asdict(self)}


def sidecar_path(trace: Path) -> Path:
    return trace.with_name(trace.name + ".expected.json")


def us(ns: int) -> str:
    q, r = divmod(ns + BASE_NS, 1000)
    return f"{q}.{r:03d}"


def dur(ns: int) -> str:
    q, r = divmod(ns, 1000)
    return f"{q}.{r:03d}"


K = ('{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %d, "ts": %s, "dur": %s, "args": '
     '{"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": %d, "correlation": %d, '
     '"registers per thread": 168, "shared memory": 0, "blocks per SM": 1.939394, "warps per SM": 15.515152, '
     '"grid": [256, 1, 1], "block": [256, 1, 1], "est. achieved occupancy %%": 25}}')
R = ('{"ph": "X", "cat": "cuda_runtime", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s, '
     '"args": {"External id": %d, "cbid": 211, "correlation": %d}}')
OP = ('{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": %d, "tid": %d, "ts": %s, "dur": %s, "args": '
      '{"External id": %d, "Record function id": 0, "Input Dims": %s, "Input type": ["c10::BFloat16"], '
      '"Ev Idx": %d}}')
U = ('{"ph": "X", "cat": "%s", "name": "%s", "pid": %s, "tid": %d, "ts": %s, "dur": %s, '
     '"args": {"External id": %d}}')
FS = '{"ph": "s", "id": %d, "pid": %d, "tid": %d, "ts": %s, "cat": "ac2g", "name": "ac2g"}'
FF = '{"ph": "f", "id": %d, "pid": 0, "tid": %d, "ts": %s, "cat": "ac2g", "name": "ac2g", "bp": "e"}'
MC = ('{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, '
      '"ts": %s, "dur": %s, "args": {"device": 0, "context": 1, "stream": 7, "correlation": %d, "bytes": 1048576}}')
SY = ('{"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": %s, "dur": %s, '
      '"args": {"cuda_sync_kind": "Stream Sync", "device": 0, "context": 1, "stream": 7, "correlation": %d}}')


class Writer:
    def __init__(self, fh: object) -> None:
        self.fh = fh
        self.buf: list[str] = []
        self.bytes = 0
        self.first = True

    def add(self, text: str) -> None:
        self.buf.append(text)
        if len(self.buf) >= 20_000:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            chunk = ("" if self.first else ",\n") + ",\n".join(self.buf)
            self.first = False
            self.fh.write(chunk)  # type: ignore[attr-defined]
            self.bytes += len(chunk)
            self.buf = []


def generate(cfg: KinetoConfig, path: Path, sidecar: bool = True) -> dict[str, object]:
    t_start = time.perf_counter()
    target = cfg.mb * 1_000_000
    kernel_ns = 0
    spans: list[tuple[np.ndarray, np.ndarray]] = []
    counts = {"kernel": 0, "cuda_runtime": 0, "cpu_op": 0, "user_annotation": 0, "ac2g": 0,
              "gpu_memcpy": 0, "cuda_sync": 0, "gpu_user_annotation": 0}
    op_kernel_ns: dict[str, int] = {}
    attributed = 0
    corr = 1
    ext = 1
    h = 0  # host clock (ns, relative)
    g = 0  # compute stream clock
    step = 0
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", '
                 '"totalGlobalMem": 85018279936, "numSms": 132}], "cupti_version": 22, '
                 '"cuda_runtime_version": 12040, "displayTimeUnit": "ms", '
                 f'"baseTimeNanoseconds": {BASE_NS - BASE_NS % 10**9},\n"traceEvents": [\n')
        w = Writer(fh)
        while w.bytes + sum(map(len, w.buf)) < target:
            step += 1
            starts: list[int] = []
            ends: list[int] = []
            s0 = h
            step_ext = ext
            ext += 1
            for _layer in range(cfg.layers):
                for outer, inner, kname, kdur, dims in LEAVES:
                    o0 = h
                    if outer:
                        h += 800
                    i0 = h
                    h += 1_200
                    c0 = h
                    cdur = 3_100 + (corr % 7) * 100
                    h += cdur
                    k0 = max(g, c0 + 4_000)
                    k1 = k0 + kdur + (corr % 5) * 10
                    g = k1 + 1_200
                    h += 900
                    i1 = h
                    if outer:
                        h += 600
                        w.add(OP % (outer, PID, PID, us(o0), dur(h - o0), ext, dims, ext))
                        ext += 1
                        counts["cpu_op"] += 1
                    w.add(OP % (inner, PID, PID, us(i0), dur(i1 - i0), ext, dims, ext))
                    w.add(R % ("cudaLaunchKernel", PID, PID, us(c0), dur(cdur), ext, corr))
                    w.add(FS % (corr, PID, PID, us(c0)))
                    w.add(K % (kname, 7, us(k0), dur(k1 - k0), ext, 7, corr))
                    w.add(FF % (corr, 7, us(k0)))
                    counts["cpu_op"] += 1
                    counts["cuda_runtime"] += 1
                    counts["kernel"] += 1
                    counts["ac2g"] += 2
                    ext += 1
                    corr += 1
                    starts.append(k0)
                    ends.append(k1)
                    kernel_ns += k1 - k0
                    attributed += k1 - k0
                    op_kernel_ns[inner] = op_kernel_ns.get(inner, 0) + (k1 - k0)
                    h += 500
            # all-reduce of the gradients on stream 13, overlapping the tail of compute
            c0 = h
            w.add(R % ("cudaLaunchKernel", PID, PID, us(c0), dur(2_500), ext, corr))
            n0 = max(c0 + 3_000, g - 200_000)
            n1 = n0 + 350_000
            w.add(K % (NCCL, 13, us(n0), dur(n1 - n0), ext, 13, corr))
            counts["cuda_runtime"] += 1
            counts["kernel"] += 1
            starts.append(n0)
            ends.append(n1)
            kernel_ns += n1 - n0
            attributed += n1 - n0
            corr += 1
            h += 4_000
            # decode: graph launches, each with many node kernels under one correlation id
            for _gl in range(cfg.graph_launches):
                c0 = h
                w.add(R % ("cudaGraphLaunch", PID, PID, us(c0), dur(9_000), ext, corr))
                counts["cuda_runtime"] += 1
                k0 = max(g, c0 + 6_000)
                for n in range(cfg.nodes_per_graph):
                    kd = 2_000 + (n % 9) * 150
                    w.add(K % (NODE, 7, us(k0), dur(kd), ext, 7, corr))
                    starts.append(k0)
                    ends.append(k0 + kd)
                    kernel_ns += kd
                    attributed += kd
                    k0 += kd + 300
                counts["kernel"] += cfg.nodes_per_graph
                g = k0
                corr += 1
                h += 12_000
            # a pageable copy, then a blocking synchronize that waits for the GPU
            c0 = h
            w.add(R % ("cudaMemcpyAsync", PID, PID, us(c0), dur(6_000), ext, corr))
            m0 = max(g, c0 + 2_000)
            w.add(MC % (us(m0), dur(90_000), corr))
            g = m0 + 90_000
            corr += 1
            h = c0 + 7_000
            s_end = max(h, g, n1) + 2_000
            w.add(R % ("cudaStreamSynchronize", PID, PID, us(h), dur(s_end - h), ext, corr))
            w.add(SY % (us(h), dur(s_end - h), corr))
            corr += 1
            counts["cuda_runtime"] += 2
            counts["gpu_memcpy"] += 1
            counts["cuda_sync"] += 1
            h = s_end + 1_000
            w.add(U % ("user_annotation", f"ProfilerStep#{step}", PID, PID, us(s0), dur(h - s0), step_ext))
            w.add(U % ("gpu_user_annotation", f"ProfilerStep#{step}", 0, 7, us(s0 + 5_000), dur(h - s0 - 5_000),
                       step_ext))
            counts["user_annotation"] += 1
            counts["gpu_user_annotation"] += 1
            h += 20_000
            g = max(g, h)
            spans.append((np.array(starts, np.int64), np.array(ends, np.int64)))
        w.flush()
        fh.write("\n]}\n")
    s = np.concatenate([a for a, _ in spans])
    e = np.concatenate([b for _, b in spans])
    expected: dict[str, object] = {
        **cfg.sidecar_key(), "steps": step, "counts": counts, "events": sum(counts.values()),
        "kernel_ns": kernel_ns, "busy_ns": {"0": _union(s, e)}, "attributed_ns": attributed,
        "operator_kernel_ns": op_kernel_ns, "bytes": path.stat().st_size,
        "generate_s": round(time.perf_counter() - t_start, 2),
    }
    if sidecar:
        sidecar_path(path).write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
    return expected


def _union(start: np.ndarray, end: np.ndarray) -> int:
    """Union length of intervals: a plain sweep over them in start order."""
    order = np.argsort(start, kind="stable")
    total, cur_s, cur_e = 0, None, None
    for s, e in zip(start[order].tolist(), end[order].tolist(), strict=True):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=KinetoConfig.mb)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    expected = generate(KinetoConfig(mb=a.mb), a.out)
    print(json.dumps({k: expected[k] for k in ("steps", "events", "kernel_ns", "bytes", "generate_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
