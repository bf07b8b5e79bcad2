"""The kernel mix: one kernel dominates (NLE101), kernel time in no category (NLE301), short
memory-bound ops dominate (NLE302), sampling kernels (NLE303), a frequent chain of short kernels
to fuse (NLE312), the same dtype casts in every step (NLE315). The compute rules leave time
another of them already claims (claims, fusion_chain, repeated_casts_reported)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from nsys_llm_explainer.analysis.comm_kernels import COMM_PATTERN
from nsys_llm_explainer.compute.peaks import NEAR_ROOF_PCT
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.math_mode import math_mode
from nsys_llm_explainer.metrics.casts import CAST_NAME
from nsys_llm_explainer.metrics.fusion_candidates import SHORT_KERNEL_NS
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.results.devices import GpuContext
from nsys_llm_explainer.results.efficiency import ComputeEfficiency
from nsys_llm_explainer.results.kernels import (
    Casts,
    Categories,
    FusionCandidate,
    FusionCandidates,
    GemmPrecision,
    KernelRow,
    TopKernels,
)
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us
from nsys_llm_explainer.rules.efficiency import LARGE_ADVICE, LOW_ROOF_PCT, SMALL_M, low_gemm_operations
from nsys_llm_explainer.rules.impact import band, device_lines, per_device, where, whole

SHARE_PCT = 25.0  # of the kernel time of its own device
MIN_DEVICE_PCT = 10.0  # devices with less kernel time than this share of the busiest one are skipped
NCU = (
    "Profile this kernel with Nsight Compute (the command is in ncu_plan.sh when written, else "
    "`ncu --kernel-name regex:NAME --launch-skip 10 --launch-count 1 --set full`) to see whether it "
    "is memory- or compute-bound and how far from the roof it runs."
)
ROCPROF = (
    "Profile this kernel with ROCm Compute Profiler (`rocprof-compute profile -n run -k NAME -- <command>`, "
    "then `rocprof-compute analyze -p workloads/run/<GPU>`) or rocprofv3 (`--kernel-include-regex NAME "
    "--kernel-iteration-range 10-10 --pmc ...`) to see whether it is memory- or compute-bound and how far "
    "from the roof it runs."
)
GEMM_SHAPES = (  # only for GEMMs whose name says tensor cores (math_mode)
    "Check its launch shapes: a tiny M (small batches) fills a sliver of each tensor-core tile; "
    "batching more work or a split-K/stream-K kernel helps."
)


def amd_gpus(view: RuleInput) -> bool:
    """The trace's GPUs are AMD (ncu_plan skipped for it, or an AMD GPU name): ROCm profilers,
    never an ncu command."""
    skipped = view.skipped("ncu_plan")
    if skipped is not None and "Nsight Compute profiles NVIDIA GPUs only" in skipped.reason:
        return True
    ctx = view.result(GpuContext)
    return ctx is not None and any(str(g.name or "").startswith("AMD") for g in ctx.gpus)


def device_kernel_ns(view: RuleInput, kernels: Sequence[KernelRow]) -> dict[int, int]:
    """Kernel time per device: categories' per-device totals, else the kernel rows' sums."""
    cats = view.result(Categories)
    if cats is not None and cats.by_device:
        return {d.device_id: int(d.total_ns) for d in cats.by_device}
    out: dict[int, int] = {}
    for k in kernels:
        out[k.device_id] = out.get(k.device_id, 0) + int(k.total_ns)
    return out


def _fp32_gemms(view: RuleInput) -> set[tuple[str, int]]:
    """(name, device) of the float32 CUDA-core GEMMs NLE323 reports."""
    res = view.result(GemmPrecision)
    if res is None:
        return set()
    return {(k.name, int(k.device_id)) for k in res.fp32_kernels}


def _roof(view: RuleInput) -> dict[tuple[str, int], float]:
    """(name, device) -> share of its roof, for kernels compute_efficiency placed plausibly."""
    return {key: pct_of_roof for key, (pct_of_roof, _) in _placed(view).items()}


def _placed(view: RuleInput) -> dict[tuple[str, int], tuple[float, float | None]]:
    """(name, device) -> (share of its roof, FLOP per byte), for kernels compute_efficiency placed
    plausibly."""
    res = view.result(ComputeEfficiency)
    if res is None:
        return {}
    return {
        (k.name, int(k.device_id)): (float(k.pct_of_roof), k.flop_per_byte)
        for k in res.kernels
        if k.pct_of_roof is not None and not k.implausible
    }


def _gemm_roof_devices(view: RuleInput) -> set[int]:
    """Devices where NLE320 puts GEMM operations' time below their roof at stake."""
    res = view.result(ComputeEfficiency)
    return {int(o.device_id) for o in low_gemm_operations(res.operations if res else ())}


def dominant(view: RuleInput) -> dict[str, list[tuple[KernelRow, float, int | None]]]:
    """Kernel name -> [(top_kernels row, share of its device's kernel time, GPU ns above the
    roof or None when the roof is not known)] for every device where it dominates."""
    res = view.result(TopKernels)
    if res is None or not res.kernels:
        return {}
    totals = device_kernel_ns(view, res.kernels)
    top: dict[int, KernelRow] = {}
    comm = re.compile(COMM_PATTERN, re.IGNORECASE)
    for k in res.kernels:  # sorted by time: the first row per device is its top kernel
        if not comm.search(k.name):  # collectives mostly wait: NLE307 reports them
            top.setdefault(k.device_id, k)
    busiest = max(totals.values(), default=0)
    fp32, roof = _fp32_gemms(view), _roof(view)
    out: dict[str, list[tuple[KernelRow, float, int | None]]] = {}
    for dev, k in top.items():
        if totals.get(dev, 0) < MIN_DEVICE_PCT / 100.0 * busiest:
            continue  # a device that ran a warm-up kernel or two says nothing about the run
        if (k.name, dev) in fp32:
            continue  # NLE323 reports it, with the fix (tensor cores)
        share = 100.0 * k.total_ns / totals[dev] if totals.get(dev) else 0.0
        if share >= SHARE_PCT:
            reached = roof.get((k.name, dev))
            above = int(k.total_ns * max(0.0, 1.0 - reached / 100.0)) if reached is not None else None
            out.setdefault(k.name, []).append((k, share, above))
    return out


def claims(view: RuleInput) -> set[tuple[str, int]]:
    """(name, device) whose time this rule puts at stake (known roof): other compute rules
    leave that kernel time out."""
    return {(k.name, int(k.device_id)) for rows in dominant(view).values()
            for k, _, above in rows if above}


def dominant_kernel(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One kernel takes a large share of its GPU's kernel time: where to look first.

    Per device, the kernel (by name) with the most time on that device, communication kernels
    left out (they mostly wait, and NLE307 reports them); it fires when it holds at least 25%
    of that device's kernel time (never divided by other devices' time, so it can fire on an
    8-GPU trace). Devices with less than 10% of the busiest device's kernel time are skipped
    (one warm-up kernel would otherwise always dominate its device). A float32 CUDA-core GEMM
    is left to NLE323, which names its fix. One finding per kernel name, listing every device
    where it dominates.

    A kernel's run time is not time at stake: it does the work. So the finding is a pointer
    (INFO, no impact) unless compute_efficiency placed the kernel under its roof (FLOPs and
    bytes from recorded shapes): then the impact is how much slower it runs than its roofline
    minimum, per device, time x (1 - pct_of_roof / 100), the ceiling of what a kernel at the
    roof would give back;
    severity from the impact bands (rules/impact.py). Other compute rules leave that kernel's
    time out. A tensor-core GEMM gets shape advice (a tiny M fills a sliver of each tile) unless
    it reaches NEAR_ROOF_PCT of its roof, which a tile-starved GEMM cannot.

    Example:

        NLE101 info: One kernel takes 61.2% of GPU 0's kernel time
        - ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn: 61.2% of GPU 0's 1.33 s of kernel time
        - 4,096 calls, 812 ms total, p50 190 µs, max 403 µs
        - its roof is not known (no operand shapes in the trace): how much of its time could be saved is not measured
    """
    totals = None
    for name, rows in dominant(view).items():
        if totals is None:
            res = view.result(TopKernels)
            totals = device_kernel_ns(view, res.kernels if res is not None else ())
        best, share, _ = max(rows, key=lambda r: r[1])
        evidence = [
            *(f"{view.kernel_label(name)}: {pct(s)} of GPU {k.device_id}'s {ms(totals[k.device_id])} "
              "of kernel time" for k, s, _ in rows[:8]),
            f"{best.calls:,} call{'' if best.calls == 1 else 's'}, {ms(best.total_ns)} total, "
            f"p50 {us(best.p50_ns)}, max {us(best.max_ns)}",
        ]
        above = {k.device_id: a for k, _, a in rows if a is not None}
        profile = ROCPROF if amd_gpus(view) else NCU
        recommendation = [profile]
        reached, intensity = _placed(view).get((name, int(best.device_id)), (None, None))
        near = reached is not None and reached >= NEAR_ROOF_PCT
        gemm = view.kernel_category(name) == "gemm"
        if gemm and math_mode(name).tensor_cores and not near:
            # Below its roof, a tensor-core GEMM's first fix is its shape; the profile says more.
            # One that reaches NEAR_ROOF_PCT of its roof is not starved by a tiny M: no shape advice,
            # nor one whose arithmetic intensity (at most about its smallest side) rules a tiny M out.
            shapes = LARGE_ADVICE[0] if intensity is not None and intensity >= SMALL_M else GEMM_SHAPES
            recommendation = [shapes, profile] if above else [profile, shapes]
        below_half = reached is not None and reached < LOW_ROOF_PCT
        if above and gemm and below_half and int(best.device_id) in _gemm_roof_devices(view):
            # A GEMM below half its roof is NLE320's time at stake: one finding per cause.
            evidence.append(f"it reaches {reached:.1f}% of the roof it sits under: its time below the roof is "
                            "counted once, in NLE320 (GEMMs far below their roofline)")
            yield rule.note(confidence=Confidence.HIGH, evidence=evidence, recommendation=recommendation,
                            title=title_of(rows, share, best))
            continue
        title = title_of(rows, share, best)
        if above:
            affected, impact = per_device(view.acct, above)
            at = f": it reaches {reached:.1f}% of the roof it sits under" if reached is not None else ""
            evidence.append(f"it runs {ms(impact[0])} slower than its roofline minimum{at} (section How close to "
                            "the hardware)")
            severity = band(impact[1])
            if severity is not None:
                yield rule.finding(
                    severity=severity,
                    confidence=Confidence.MEDIUM,
                    evidence=evidence,
                    recommendation=recommendation,
                    title=title,
                    affected=affected,
                    impact=impact,
                    cause=Cause.COMPUTE,
                )
                continue
        else:
            evidence.append("its roof is not known (no operand shapes in the trace): how much of its time "
                            "could be saved is not measured")
        yield rule.note(
            confidence=Confidence.HIGH,
            evidence=evidence,
            recommendation=recommendation,
            title=title,
        )


def title_of(rows: list[tuple[KernelRow, float, int | None]], share: float, best: KernelRow) -> str:
    if len(rows) == 1:
        return f"One kernel takes {pct(share)} of GPU {best.device_id}'s kernel time"
    return (f"One kernel takes up to {pct(share)} of the kernel time of {len(rows)} GPUs (GPU {best.device_id}: "
            f"{pct(share)})")


NLE101 = Rule(
    id="NLE101",
    name="dominant-kernel",
    title="One kernel dominates its GPU's time",
    check=dominant_kernel,
    metric_ids=("top_kernels", "categories", "compute_efficiency", "gemm_precision"),
)


UNCATEGORIZED_MEDIUM_PCT = 30.0  # share of kernel time the category table could not name
SHOWN = 3


def uncategorized_kernels(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Much kernel time falls in no kernel category ("other").

    Fires (a note, severity info) when at least 30% of kernel time is "other" in the categories
    metric: the category breakdown then says little, and the largest unnamed kernels are
    listed so they can be added with --kernel-categories.

    Example:

        NLE301 info: 42.0% of kernel time is in no kernel category
        - 42.0% of 812.300 ms kernel time is "other" (table: built-in)
        - largest: my_custom_kernel (301.200 ms)
    """
    d = view.result(Categories)
    if d is None or d.other_pct < UNCATEGORIZED_MEDIUM_PCT:
        return
    top = ", ".join(
        f"{view.kernel_label(k.name)} ({ms(k.total_ns)})" for k in d.top_uncategorized[:SHOWN]
    )
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f'{pct(d.other_pct)} of {ms(d.total_kernel_ns)} kernel time is "other" '
            f"(table: {d.table_source})",
            f"largest: {top}",
        ],
        recommendation=[
            "Add rules for these kernels in a JSON file and pass it with --kernel-categories "
            "(format: docs/metrics/categories.md)."
        ],
        title=f"{pct(d.other_pct)} of kernel time is in no kernel category",
    )


NLE301 = Rule(
    id="NLE301",
    name="uncategorized-kernels",
    title="Kernel time in no category",
    check=uncategorized_kernels,
    metric_ids=("categories",),
)


SMALL_OP_CATEGORIES = ("activation_elementwise", "memory", "cast_copy", "layout", "reduction", "norm")
SMALL_OP_MEDIUM_PCT = 35.0  # of a device's kernel time
# SHORT_KERNEL_NS (30 us, from fusion_candidates): a kernel counts only when its median call is
# at most this long. A 17 ms elementwise kernel streams memory at full speed: fusing gains little.


def small_op_heavy(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Short memory-bound ops (elementwise, copies, reductions, norms) take a large share.

    Per device, from top_kernels: the kernels of the categories activation_elementwise,
    memory, cast_copy, layout, reduction and norm whose median call lasts at most
    SHORT_KERNEL_NS (30 us, fusion_candidates' short kernel). Long ones are left out: a
    kernel that runs for milliseconds streams memory at full speed, and fusing it with its
    neighbours saves little. Fires on the devices where the short ones hold at least 35% of
    the device's kernel time: the GPU mostly streams tensors through unfused ops instead of
    doing GEMM/attention math, and fusion (torch.compile, fused norm and activation kernels)
    is the lever; see fusion_candidates for concrete chains.

    Impact: those kernels' time per device (the ceiling of what fusing them away can give
    back), without the time other compute findings already put at stake: a dominant kernel
    whose roof is known (NLE101) and the dtype casts NLE315 reports (the same casts in every
    step, FSDP's mixed precision among them) are left out, and NLE312's per-launch saving is
    taken off, spread over the devices by their share. Severity from the impact bands (rules/impact.py).

    Example:

        NLE302 medium: Short unfused ops take 41.3% of GPU 0's kernel time
        - GPU 0: activation_elementwise 20.1%, memory 11.0%, reduction 6.2%, norm 4.0% of 120.000 ms
        - 3 small-op kernels with a median over 30.0 us (8.200 ms) are not counted: they are not short
    """
    res = view.result(TopKernels)
    if res is None:
        return
    taken = claims(view)
    casts_reported = repeated_casts_reported(view)
    total: dict[int, int] = {}
    small: dict[int, dict[str, int]] = {}
    long_n, long_ns, cast_ns = 0, 0, 0
    for k in res.kernels:
        dev = int(k.device_id)
        total[dev] = total.get(dev, 0) + int(k.total_ns)
        cat = view.kernel_category(k.name)
        if cat not in SMALL_OP_CATEGORIES or (k.name, dev) in taken:
            continue
        if casts_reported and CAST_NAME.search(k.name):
            cast_ns += int(k.total_ns)
            continue
        if int(k.p50_ns) > SHORT_KERNEL_NS:
            long_n, long_ns = long_n + 1, long_ns + int(k.total_ns)
            continue
        per = small.setdefault(dev, {})
        per[cat] = per.get(cat, 0) + int(k.total_ns)
    heavy = {dev: per for dev, per in small.items()
             if total.get(dev) and 100.0 * sum(per.values()) / total[dev] >= SMALL_OP_MEDIUM_PCT}
    if not heavy:
        return
    ns = {dev: sum(per.values()) for dev, per in heavy.items()}
    chain = fusion_chain(view)
    if chain is not None and chain.saving_ns:
        all_ns = sum(ns.values())
        ns = {dev: max(0, v - chain.saving_ns * v // all_ns) for dev, v in ns.items()}
    affected, impact = per_device(view.acct, ns)
    severity = band(impact[1])
    if severity is None:
        return
    evidence = []
    for dev, per in sorted(heavy.items())[:8]:
        parts = sorted(per.items(), key=lambda kv: -kv[1])
        evidence.append(f"GPU {dev}: " + ", ".join(f"{c} {pct(100.0 * v / total[dev])}" for c, v in parts)
                        + f" of {ms(total[dev])}")
    if long_n:
        evidence.append(f"{long_n} small-op kernels with a median over {us(SHORT_KERNEL_NS)} ({ms(long_ns)}) are "
                        "not counted: they are not short")
    if chain is not None and chain.saving_ns:
        evidence.append(f"{ms(chain.saving_ns)} of launch savings is NLE312's, not counted here")
    if cast_ns:
        evidence.append(f"{ms(cast_ns)} of dtype-cast kernels is NLE315's (the same casts in every step), not "
                        "counted here")
    worst = max(heavy, key=lambda d: sum(heavy[d].values()) / total[d])
    share = 100.0 * sum(heavy[worst].values()) / total[worst]
    title = (f"Short unfused ops take {pct(share)} of {where(affected)} kernel time" if len(heavy) == 1
             else f"Short unfused ops take up to {pct(share)} of the kernel time of {len(heavy)} GPUs")
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=evidence,
        recommendation=advice("fusion", view.workload),
        title=title,
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


NLE302 = Rule(
    id="NLE302",
    name="small-op-heavy",
    title="Short memory-bound ops dominate kernel time",
    check=small_op_heavy,
    metric_ids=("top_kernels", "categories", "fusion_candidates"),
)


SAMPLING_MEDIUM_PCT = 10.0
LLM_WORKLOADS = ("llm_inference", "llm_prefill", "llm_training")


def sampling_heavy(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Sampling kernels (top-k/top-p, sorts, argmax, penalties) take >= 10% of kernel time.

    In a healthy decode step sampling is a few percent. Sort-based top-p over the full
    vocabulary, repeated penalty passes or per-request sampling loops push it higher. Only
    for LLM workloads (workload metric). Impact: the sampling kernels' time per device;
    severity from the impact bands (rules/impact.py).

    Example:

        NLE303 medium: Sampling takes 14.2% of kernel time
        - 14.2% of 96.000 ms kernel time in category sampling (812 kernels)
    """
    res = view.result(Categories)
    if res is None or view.workload not in LLM_WORKLOADS:
        return
    row = res.category("sampling")
    if row is None or row.pct_of_scope_time < SAMPLING_MEDIUM_PCT:
        return
    affected, impact = per_device(view.acct, {
        d.device_id: sum(c.total_ns for c in d.categories if c.category == "sampling")
        for d in res.by_device
    })
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=[
            f"{pct(row.pct_of_scope_time)} of {ms(res.total_kernel_ns)} "
            "kernel time in category "
            f"sampling ({row.kernel_count:,} kernels)"
        ],
        recommendation=[
            "Use sorting-free fused sampling kernels (e.g. FlashInfer top-k/top-p "
            "sampling) and batch "
            "sampling across requests."
        ],
        title=f"Sampling takes {pct(row.pct_of_scope_time)} of kernel time",
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


NLE303 = Rule(
    id="NLE303",
    name="sampling-heavy",
    title="Sampling kernels take a large share",
    check=sampling_heavy,
    metric_ids=("categories",),
)


MIN_OCCURRENCES = 50
MIN_PROXIMITY = 0.3
MIN_KERNEL_NS = 1_000_000  # the chain's kernels take at least 1 ms in total
PER_LAUNCH_SAVING_NS = 1_000  # per kernel a fused chain no longer runs: its ramp-up and tail
# Chains with one of these are not short memory-bound ops: fusing a GEMM or attention kernel
# with its neighbours is an epilogue or a different kernel, not this rule's fix.
COMPUTE_CATEGORIES = ("gemm", "attention", "conv", "fft", "moe", "communication")


@frozen
class Chain:
    candidate: FusionCandidate
    gaps_ns: int  # removable gaps inside the occurrences, at most the devices' host-side idle
    saving_ns: int  # the per-launch saving of the kernels fusion removes

    @property
    def impact_ns(self) -> int:
        return self.gaps_ns + self.saving_ns


def fusion_chain(view: RuleInput) -> Chain | None:
    """The best-ranked fusion candidate this rule reports, with its time at stake (see check)."""
    res = view.result(FusionCandidates)
    if res is None:
        return None
    casts: bool | None = None  # whether NLE315 reports the casts, asked only when a chain is all casts
    for c in res.candidates:
        if (
            c.occurrences < MIN_OCCURRENCES
            or c.proximity < MIN_PROXIMITY
            or c.kernel_ns < MIN_KERNEL_NS
            or any(view.kernel_category(k) in COMPUTE_CATEGORIES for k in c.kernels)
        ):
            continue
        if all(CAST_NAME.search(k) for k in c.kernels):
            if casts is None:
                casts = repeated_casts_reported(view)
            if casts:  # the same casts in every step: NLE315's cause, not a fusion chain
                continue
        gaps = min(int(c.removable_gap_ns), view.acct.total(Cause.HOST))
        removed = int(c.occurrences) * (int(c.length) - 1)
        saving = min(removed * PER_LAUNCH_SAVING_NS, int(c.kernel_ns) // 2)
        return Chain(c, gaps, saving)
    return None


def fusion_candidate(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A chain of short memory-bound kernels repeats often enough to be worth one fused kernel.

    Takes the best-ranked fusion candidate that occurs >= 50 times, follows its first kernel
    in >= 30% of that kernel's occurrences (proximity), holds >= 1 ms of kernel time, and has
    no GEMM, attention, convolution, FFT, MoE or communication kernel in it (those are not
    short memory-bound ops; fusing them is a different kernel, not a fused chain), and is not
    made of dtype casts alone that NLE315 reports (the same casts in every step: one cause). Fusing the
    chain removes its launches and the idle gaps inside it, and keeps the intermediate
    tensors on chip.

    Impact (a ceiling of what fusion gives back, never the chain's kernel time, which the
    fused kernel still spends): the gaps inside the occurrences (removable_gap_ns), at most
    the devices' host-side idle time (launch_bound and host_other: fusing removes launches,
    not syncs or copies), plus PER_LAUNCH_SAVING_NS (1 us: a short kernel's ramp-up and
    tail) for each kernel fusion removes (length - 1 per occurrence), at most half the
    chain's kernel time. Over all devices' windows; severity from the impact bands
    (rules/impact.py). The bytes the intermediates no longer move are not in a trace, so
    they are not counted.

    Example:

        NLE312 low: A chain of 6 short memory-bound kernels repeats 112 times
        - pow -> mean -> add -> rsqrt -> mul -> mul (an unfused RMSNorm)
        - at stake: 0.733 ms of gaps inside the chain and 560 launches removed x 1.0 us
        - 2.101 ms of kernel time (not at stake: the fused kernel does the same work), proximity 46.7%
    """
    found = fusion_chain(view)
    if found is None:
        return
    c = found.candidate
    affected, impact = whole(view.acct, found.impact_ns)
    severity = band(impact[1])
    if severity is None:
        return
    removed = int(c.occurrences) * (int(c.length) - 1)
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=[
            " -> ".join(view.kernel_label(k) for k in c.kernels),
            f"at stake: {ms(found.gaps_ns)} of gaps inside the chain and {removed:,} launches removed x "
            f"{us(PER_LAUNCH_SAVING_NS)} ({ms(found.saving_ns)})",
            f"{ms(c.kernel_ns)} of kernel time (not at stake: the fused kernel does the same work), "
            f"proximity {pct(100 * c.proximity)}",
        ],
        recommendation=advice("fusion", view.workload),
        title=f"A chain of {c.length} short memory-bound kernels repeats {c.occurrences:,} times",
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


NLE312 = Rule(
    id="NLE312",
    name="fusion-candidate",
    title="Frequent chain of short kernels",
    check=fusion_candidate,
    metric_ids=("fusion_candidates",),
)


FSDP_SHARE = 0.5  # of the cast time inside FSDP ranges: FSDP's mixed precision
FSDP_ADVICE = (
    "These are FSDP's mixed-precision casts (`MixedPrecision(param_dtype=...)`): each unit's fp32 shard is "
    "cast before its all-gather and the gradients back after the reduce-scatter, one cause. FSDP2 "
    "(`fully_shard` with `MixedPrecisionPolicy`) casts inside the all-gather's copy-in; keeping the sharded "
    "parameters in the compute dtype (fp32 only in the optimizer state) removes them.",
)
ADVICE = {
    "training": (
        "If these casts convert weights, keep a low-precision copy instead of re-casting in every "
        "step, or let the optimizer own the fp32 master weights (mixed-precision optimizers, FSDP "
        "`MixedPrecision(param_dtype=...)`).",
    ),
    "inference": (
        "If these casts convert weights, cast the model once at load (`model.to(torch.bfloat16)`) "
        "instead of running it under autocast with fp32 weights, which re-casts them every forward.",
        "Keep activations in the compute dtype end to end so no cast is needed between layers.",
    ),
    "generic": (
        "Store the data in the dtype the kernels consume and convert once, not on every iteration.",
    ),
}


def repeated_casts_reported(view: RuleInput) -> bool:
    """Whether this rule yields a finding: the cast kernels are then its, and the other
    compute findings (NLE302, NLE312) leave them out (one cause, one finding)."""
    return any(True for _ in repeated_casts(view, NLE315))


def repeated_casts(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The same dtype casts run in every step: typically weights re-cast each forward.

    From the casts metric: with at least 3 steps, cast kernels appear in at least 80% of them
    with a stable count (p90 at most 1.5 x p10). Impact: the cast kernels' time per device (the
    ceiling of what casting once gives back); severity from the impact bands (rules/impact.py).
    When at least half of the cast time is launched inside FSDP's ranges, the casts are FSDP's
    mixed precision (parameters cast before each all-gather, gradients after each
    reduce-scatter): one cause, named as such, with FSDP's advice. Either way the cast kernels
    are this finding's: NLE302 and NLE312 leave them out.

    Example:

        NLE315 low: 392 dtype casts in every step (2.1% of GPU 0's time)
        - GPU 0: 21.000 ms of cast kernels (2.1% of its window)
        - 392 casts per step at the median, 3.500 ms per step; in 24 of 24 steps
    """
    d = view.result(Casts)
    if d is None or d.per_step is None or not d.per_step.every_step:
        return
    affected, impact = per_device(view.acct, {r.device_id: r.cast_ns for r in d.devices})
    severity = band(impact[1])
    if severity is None:
        return
    s = d.per_step
    group = "training" if "training" in view.workload else "inference" if view.workload != "generic_cuda" else "generic"
    fsdp = int(d.fsdp_ns or 0) >= FSDP_SHARE * int(d.cast_ns) > 0
    evidence = [
        *device_lines(affected, "of cast kernels"),
        f"{s.casts_per_step_p50:,} casts per step at the median, {ms(s.cast_ns_per_step_p50)} per step; "
        f"in {s.steps_with_casts:,} of {s.steps:,} steps",
        "largest: " + ", ".join(f"{view.kernel_label(t.name)} ({ms(t.total_ns)})" for t in d.top[:3]),
    ]
    if fsdp:
        evidence.append(f"{ms(d.fsdp_ns)} of them launched inside FSDP's ranges: its mixed-precision parameter "
                        "and gradient casts, one cause (the short-kernel and fusion findings leave them to this one)")
    yield rule.finding(
        severity=severity,
        confidence=Confidence.MEDIUM,
        evidence=evidence,
        recommendation=FSDP_ADVICE if fsdp else ADVICE[group],
        title=f"{s.casts_per_step_p50:,} dtype casts in every step ({pct(impact[1])} of {where(affected)} time)",
        affected=affected,
        impact=impact,
        cause=Cause.COMPUTE,
    )


NLE315 = Rule(
    id="NLE315",
    name="repeated-casts",
    title="The same dtype casts in every step",
    check=repeated_casts,
    metric_ids=("casts",),
)


RULES = (NLE101, NLE301, NLE302, NLE303, NLE312, NLE315)
