"""What bounds a launch, in a class and in words, and where it sits on the roofline.

Class, from ncu's Speed of Light figures (% of the peak sustained rate of the busiest unit):
SM = compute (SM) throughput, memory = memory throughput (the busiest of DRAM, L2, L1 ...).
The rule is ncu's own (its SOLBottleneck rule), with BUSY_PCT = 60:

- compute-bound: SM >= 60 and memory < 60;
- memory-bound: memory >= 60 and SM < 60;
- balanced: both >= 60;
- latency-bound: both < 60: neither unit is kept busy, the warps wait (on memory latency,
  on dependencies, or there are too few of them); the limiter names the evidence.

The compute side is the busier of the SM throughput and the tensor-pipe utilisation, where
the export has it: a GEMM's work is on the tensor pipe, which SM throughput can understate,
so a GEMM whose tensor pipe is busy is compute-bound by it (the limiter says "tensor pipe at
85% of peak"). A launch without both figures gets no class, with the reason. Its distance
from the roof, `pct_of_roof`, is the larger of the two: how close the busiest unit came to
its peak.

The limiter in words: the busy unit ("DRAM at 85% of peak"), or for latency-bound launches
the counters that explain the wait, in this order: a grid smaller than one wave of the GPU
(waves per SM < 1), low occupancy (achieved < LOW_OCCUPANCY_PCT) with what limits it (the
smallest of the occupancy section's block limits: registers, shared memory, warps per
block, blocks per SM), the warp stall with the most cycles, and how often an instruction
issues. "occupancy 8% from 168 registers per thread" reads: theoretical occupancy is held
down by the registers each thread needs.

Roofline point: the precision with the most FLOPs (tensor-path operations by source type,
or CUDA-core FLOPs), its FLOPs per DRAM byte and its achieved FLOP/s, under the roof
min(peak, intensity x bandwidth). No point where the FLOPs would be understated: tensor-pipe
work counted in instructions only (more than TENSOR_FLOPS_PER_INST each could explain), or
a kernel whose name says tensor-core work (TENSOR_NAME) with no tensor counter at all.
Peaks come from the roofline chart section when the export has it (FP32, FP64, FP16 on
the CUDA cores, DRAM), else from the GPU peak table (gpu_specs: tensor peaks, FP32, memory
bandwidth) when the GPU is known; else there is no roof, with the reason. The roofline's
intensity counts DRAM bytes only: for a launch whose data stays in L2 (L2 hit rate at least
L2_RESIDENT_HIT_PCT, or L2 traffic at least L2_TRAFFIC_RATIO x its DRAM bytes) it overstates
what the memory system delivered, and the point is flagged (`dram_only`, with the note).
"""

from __future__ import annotations

import re

from nsys_llm_explainer.compute.peaks import GpuSpec
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.ncu.counters import SRC_DTYPE, Figures

BUSY_PCT = 60.0  # % of peak: a unit this busy bounds the launch (ncu's SOLBottleneck threshold)
LOW_OCCUPANCY_PCT = 25.0  # achieved occupancy below this is named as a cause of latency
ACHIEVED_SHORTFALL = 0.6  # achieved below this share of theoretical occupancy: named as such
TAIL_WAVES = 4.0  # with fewer waves than this, a part-empty last wave costs a visible share
TAIL_FRACTION = (0.05, 0.75)  # a last wave this full is part-empty
TENSOR_FLOPS_PER_INST = 512  # the fewest FLOPs one warp-wide tensor instruction does
# Kernel names that say tensor-core work (GEMM, MMA, attention libraries).
TENSOR_NAME = re.compile(r"gemm|mma|tensorop|xmma|nvjet|flash|fmha|attention|s16816|s1688|s161616", re.IGNORECASE)
CLASSES = ("compute-bound", "memory-bound", "latency-bound", "balanced")
L2_RESIDENT_HIT_PCT = 80.0
L2_TRAFFIC_RATIO = 4.0


@frozen
class Verdict:
    kind: str | None  # one of CLASSES, or None (not enough counters)
    pct_of_roof: float | None  # max(SM %, memory %)
    limiter: str | None  # in words
    reason: str | None  # why there is no class
    occupancy_limit: str | None  # the block limit that holds theoretical occupancy down
    causes: tuple[str, ...] = ()  # latency-bound: what explains the wait, most telling first


def _binding(f: Figures) -> list[str]:
    """The block limits that bind (fewest blocks per SM), registers first among equals."""
    if not f.block_limits:
        return []
    low = min(f.block_limits.values())
    return [k for k in ("registers", "shared memory", "warps", "blocks", "barriers") if f.block_limits.get(k) == low]


def occupancy_limit(f: Figures) -> str | None:
    """What holds theoretical occupancy down: the binding block limits, joined by "and"."""
    binding = _binding(f)
    return " and ".join(binding) if binding else None


def _limit_words(f: Figures, limit: str) -> str:
    if limit == "registers":
        regs = f.registers_per_thread
        return f"{regs:,.0f} registers per thread" if regs else "the registers per thread"
    if limit == "shared memory":
        if f.shared_mem_per_block:
            return f"{f.shared_mem_per_block / 1024:,.1f} KiB of shared memory per block"
        return "the shared memory per block"
    if limit == "warps" and f.block_size:
        return f"{f.block_size:,.0f} threads per block"
    return {"blocks": "the blocks-per-SM limit", "barriers": "the barriers per SM"}.get(limit, limit)


def _blocks(n: float) -> str:
    return f"{n:,.0f} block{'' if n == 1 else 's'}"


def _waves(w: float) -> str:
    return "under 0.01" if w < 0.01 else f"{w:.2f}"


def _memory_unit(f: Figures) -> str:
    units = [(v, n) for v, n in ((f.dram_pct, "DRAM"), (f.l2_pct, "L2"), (f.l1_pct, "L1/TEX")) if v is not None]
    if not units:
        return f"memory at {f.memory_pct:.0f}% of peak"
    v, name = max(units)
    if f.memory_pct is not None and f.memory_pct > v + 5:
        return f"memory at {f.memory_pct:.0f}% of peak"
    return f"{name} at {v:.0f}% of peak"


def _latency_causes(f: Figures) -> list[str]:
    causes = []
    w = f.waves_per_sm
    if w is not None and w < 1:
        blocks = f" ({_blocks(f.grid_size)})" if f.grid_size else ""
        causes.append(f"the grid fills {_waves(w)} of a wave{blocks}")
    elif w is not None and w < TAIL_WAVES and TAIL_FRACTION[0] <= w % 1 <= TAIL_FRACTION[1]:
        causes.append(f"{w:.2f} waves: the last one runs part-empty")
    elif w is None and f.grid_size and f.sm_count and f.grid_size < f.sm_count:
        causes.append(f"{_blocks(f.grid_size)} for {f.sm_count:,.0f} SMs")
    a, t = f.achieved_occupancy_pct, f.theoretical_occupancy_pct
    if a is not None and a < LOW_OCCUPANCY_PCT:
        binding = _binding(f)
        if t is not None and t < 2 * LOW_OCCUPANCY_PCT and binding:
            why = f"{' and '.join(_limit_words(f, b) for b in binding)}, {_blocks(min(f.block_limits.values()))} per SM"
            if a < ACHIEVED_SHORTFALL * t:
                causes.append(f"occupancy {a:.0f}% (theoretical {t:.0f}% from {why})")
            else:
                causes.append(f"occupancy {a:.0f}% from {why}")
        elif t is not None and a < ACHIEVED_SHORTFALL * t:
            causes.append(f"occupancy {a:.0f}% of a theoretical {t:.0f}%")
        else:
            causes.append(f"occupancy {a:.0f}%")
    if f.top_stall is not None:
        causes.append(f"warps stall most on {f.top_stall[0]} ({f.top_stall[1]:,.1f} cycles per issued instruction)")
    if f.issue_active_pct is not None and f.issue_active_pct < 50 and f.top_stall is None:
        causes.append(f"an instruction issues in {f.issue_active_pct:.0f}% of cycles")
    return causes


def _compute(f: Figures) -> tuple[float | None, str]:
    """The compute side: the busier of SM throughput and tensor-pipe utilisation, and its name."""
    sm, tensor = f.sm_pct, f.tensor_pct
    if tensor is not None and (sm is None or tensor > sm):
        return tensor, "tensor pipe"
    return sm, "SM"


def classify(f: Figures) -> Verdict:
    limit = occupancy_limit(f)
    (sm, unit), mem = _compute(f), f.memory_pct
    if sm is None or mem is None:
        missing = [f.missing.get(k) for k, v in (("sm_pct", sm), ("memory_pct", mem)) if v is None]
        reason = "; ".join(m for m in missing if m) or "no throughput figures"
        return Verdict(None, None, None, reason, limit)
    top = max(sm, mem)
    if sm >= BUSY_PCT and mem >= BUSY_PCT:
        return Verdict("balanced", top, f"{unit} at {sm:.0f}% and memory at {mem:.0f}% of peak", None, limit)
    if sm >= BUSY_PCT:
        return Verdict("compute-bound", top, f"{unit} at {sm:.0f}% of peak", None, limit)
    if mem >= BUSY_PCT:
        return Verdict("memory-bound", top, _memory_unit(f), None, limit)
    causes = _latency_causes(f)
    head = f"{unit} {sm:.0f}%, memory {mem:.0f}% of peak"
    tail = "; ".join(causes) if causes else "no occupancy, grid or stall counter in the export explains the wait"
    return Verdict("latency-bound", top, f"{head}: {tail}", None, limit, tuple(causes))


@frozen
class RooflinePoint:
    precision: str  # "bf16" (tensor path), "fp32" (CUDA cores) ...
    tensor: bool
    flops: float
    flop_per_byte: float | None  # None without DRAM bytes
    achieved_flops: float  # FLOP/s
    peak_flops: float | None
    peak_bandwidth: float | None  # bytes/s
    roof_flops: float | None  # min(peak, intensity x bandwidth)
    pct_of_roof: float | None
    bound: str | None  # "compute" or "memory" (intensity beyond the ridge point or not)
    basis: str  # where the peaks come from
    reason: str | None  # why there is no roof
    dram_only: bool = False  # its data stays in L2: a DRAM-only intensity overstates it
    note: str | None = None


def _dominant(f: Figures) -> tuple[str, bool, float] | None:
    best: tuple[str, bool, float] | None = None
    for key, ops in f.tensor_ops.items():
        src = key.split("->")[0]
        prec = SRC_DTYPE.get(src, src)
        if ops > 0 and (best is None or ops > best[2]):
            best = (prec, True, ops)
    for prec, ops in f.flops.items():
        if ops > 0 and (best is None or ops > best[2]):
            best = (prec, False, ops)
    return best


def roofline(
    f: Figures, spec: GpuSpec | None, spec_basis: str = "", kernel: str = ""
) -> tuple[RooflinePoint | None, str | None]:
    """The launch's point on the roofline of its dominant precision, or None and the reason
    there is none."""
    dom = _dominant(f)
    if not f.duration_ns:
        return None, "no duration"
    if dom is None:
        return None, f.missing.get("flops") or "no FLOPs were counted"
    prec, tensor, ops = dom
    if not tensor and not f.tensor_ops and f.tensor_instructions is None and TENSOR_NAME.search(kernel):
        return None, (
            "its name says tensor-core work and the export counts no tensor-path operations "
            "(sm__ops_path_tensor_*): its CUDA-core FLOPs would understate it"
        )
    if not tensor and not f.tensor_ops and (f.tensor_instructions or 0) * TENSOR_FLOPS_PER_INST > ops:
        return None, (
            f"its tensor-pipe work is counted in instructions only ({f.tensor_instructions:,.0f}), which have no "
            "fixed FLOP count: collect sm__ops_path_tensor_* (or the tensor roofline section)"
        )
    achieved = ops / (f.duration_ns * 1e-9)
    peak = bandwidth = None
    basis = []
    if f.peaks is not None:
        if not tensor and prec in f.peaks.flops:
            peak = f.peaks.flops[prec]
            basis.append("roofline section")
        if f.peaks.dram_bandwidth:
            bandwidth = f.peaks.dram_bandwidth
            if "roofline section" not in basis:
                basis.append("roofline section")
    if spec is not None:
        if peak is None and (tensor or prec in ("fp32", "fp64")):
            tflops = spec.peak_tflops(prec) if tensor or prec != "fp64" else (spec.fp64_tflops or None)
            if tflops:
                peak = tflops * 1e12
                basis.append(f"peak table ({spec_basis or spec.model})")
        if bandwidth is None:
            bandwidth = spec.hbm_gbps * 1e9
            if not any(b.startswith("peak table") for b in basis):
                basis.append(f"peak table ({spec_basis or spec.model})")
    intensity = ops / f.dram_bytes if f.dram_bytes else None
    roof = bound = pct = None
    reason = None
    if peak is None:
        where = "tensor-path " if tensor else ""
        section = "the roofline section has none" if f.peaks is not None else "the export has no roofline section"
        reason = (f"no {where}{prec.upper()} peak: {section} and the GPU is not known to the peak table "
                  "(name it with --gpu, or add it with --gpu-peaks)" if spec is None else
                  f"no {where}{prec.upper()} peak: the peak table has none for {spec.model}")
    elif intensity is not None and bandwidth:
        roof = min(peak, intensity * bandwidth)
        bound = "compute" if intensity >= peak / bandwidth else "memory"
    else:
        roof = peak
        reason = "no DRAM byte count or bandwidth peak: the roof is the compute peak alone"
    if roof:
        pct = 100.0 * achieved / roof
    resident = l2_resident(f)
    return RooflinePoint(prec, tensor, ops, intensity, achieved, peak, bandwidth, roof, pct, bound,
                         ", ".join(basis) or "none", reason, resident is not None, resident), None


def l2_resident(f: Figures) -> str | None:
    """Why the launch's data stays in L2 (its DRAM-only intensity overstates it), or None."""
    why = []
    if f.l2_hit_pct is not None and f.l2_hit_pct >= L2_RESIDENT_HIT_PCT:
        why.append(f"L2 hit rate {f.l2_hit_pct:.0f}%")
    if f.l2_bytes and f.dram_bytes is not None and f.l2_bytes >= L2_TRAFFIC_RATIO * max(f.dram_bytes, 1.0):
        why.append(f"L2 traffic {f.l2_bytes / max(f.dram_bytes, 1.0):,.0f}x its DRAM bytes")
    if not why:
        return None
    return (f"DRAM-only arithmetic intensity: its data stays in L2 ({', '.join(why)}), so FLOPs per DRAM byte "
            "overstate what the memory system had to deliver; the L2 bandwidth, not DRAM's, is its memory roof")


__all__ = [
    "BUSY_PCT", "CLASSES", "LOW_OCCUPANCY_PCT", "RooflinePoint", "Verdict", "classify", "occupancy_limit", "roofline",
]
