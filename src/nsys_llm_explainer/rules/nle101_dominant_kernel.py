from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.analysis.comm_kernels import COMM_PATTERN
from nsys_llm_explainer.compute.peaks import NEAR_ROOF_PCT
from nsys_llm_explainer.kernels.math_mode import math_mode
from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us
from nsys_llm_explainer.rules.impact import band, per_device

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
    ctx = view.metric("gpu_context")
    return ctx is not None and any(str(g.get("name") or "").startswith("AMD") for g in ctx.data.get("gpus", []))


def device_kernel_ns(view: RuleInput, kernels: list[dict[str, Any]]) -> dict[int, int]:
    """Kernel time per device: categories' per-device totals, else the kernel rows' sums."""
    cats = view.metric("categories")
    if cats is not None and cats.data.get("by_device"):
        return {d["device_id"]: int(d["total_ns"]) for d in cats.data["by_device"]}
    out: dict[int, int] = {}
    for k in kernels:
        out[k["device_id"]] = out.get(k["device_id"], 0) + int(k["total_ns"])
    return out


def _fp32_gemms(view: RuleInput) -> set[tuple[str, int]]:
    """(name, device) of the float32 CUDA-core GEMMs NLE323 reports."""
    res = view.metric("gemm_precision")
    if res is None:
        return set()
    return {(k["name"], int(k["device_id"])) for k in res.data.get("fp32_kernels", [])}


def _roof(view: RuleInput) -> dict[tuple[str, int], float]:
    """(name, device) -> share of its roof, for kernels compute_efficiency placed plausibly."""
    res = view.metric("compute_efficiency")
    if res is None:
        return {}
    return {
        (k["name"], int(k["device_id"])): float(k["pct_of_roof"])
        for k in res.data.get("kernels", [])
        if k.get("pct_of_roof") is not None and not k.get("implausible")
    }


def dominant(view: RuleInput) -> dict[str, list[tuple[dict[str, Any], float, int | None]]]:
    """Kernel name -> [(top_kernels row, share of its device's kernel time, GPU ns above the
    roof or None when the roof is not known)] for every device where it dominates."""
    res = view.metric("top_kernels")
    if res is None or not res.data["kernels"]:
        return {}
    totals = device_kernel_ns(view, res.data["kernels"])
    top: dict[int, dict[str, Any]] = {}
    comm = re.compile(COMM_PATTERN, re.IGNORECASE)
    for k in res.data["kernels"]:  # sorted by time: the first row per device is its top kernel
        if not comm.search(k["name"]):  # collectives mostly wait: NLE307 reports them
            top.setdefault(k["device_id"], k)
    busiest = max(totals.values(), default=0)
    fp32, roof = _fp32_gemms(view), _roof(view)
    out: dict[str, list[tuple[dict[str, Any], float, int | None]]] = {}
    for dev, k in top.items():
        if totals.get(dev, 0) < MIN_DEVICE_PCT / 100.0 * busiest:
            continue  # a device that ran a warm-up kernel or two says nothing about the run
        if (k["name"], dev) in fp32:
            continue  # NLE323 reports it, with the fix (tensor cores)
        share = 100.0 * k["total_ns"] / totals[dev] if totals.get(dev) else 0.0
        if share >= SHARE_PCT:
            reached = roof.get((k["name"], dev))
            above = int(k["total_ns"] * max(0.0, 1.0 - reached / 100.0)) if reached is not None else None
            out.setdefault(k["name"], []).append((k, share, above))
    return out


def claims(view: RuleInput) -> set[tuple[str, int]]:
    """(name, device) whose time this rule puts at stake (known roof): other compute rules
    leave that kernel time out."""
    return {(k["name"], int(k["device_id"])) for rows in dominant(view).values()
            for k, _, above in rows if above}


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
            res = view.metric("top_kernels")
            totals = device_kernel_ns(view, res.data["kernels"] if res is not None else [])
        best, share, _ = max(rows, key=lambda r: r[1])
        evidence = [
            *(f"{view.kernel_label(name)}: {pct(s)} of GPU {k['device_id']}'s {ms(totals[k['device_id']])} "
              "of kernel time" for k, s, _ in rows[:8]),
            f"{best['calls']:,} call{'' if best['calls'] == 1 else 's'}, {ms(best['total_ns'])} total, "
            f"p50 {us(best['p50_ns'])}, max {us(best['max_ns'])}",
        ]
        above = {k["device_id"]: a for k, _, a in rows if a is not None}
        profile = ROCPROF if amd_gpus(view) else NCU
        recommendation = [profile]
        reached = _roof(view).get((name, int(best["device_id"])))
        near = reached is not None and reached >= NEAR_ROOF_PCT
        if view.kernel_category(name) == "gemm" and math_mode(name).tensor_cores and not near:
            # Below its roof, a tensor-core GEMM's first fix is its shape; the profile says more.
            # One that reaches NEAR_ROOF_PCT of its roof is not starved by a tiny M: no shape advice.
            recommendation = [GEMM_SHAPES, profile] if above else [profile, GEMM_SHAPES]
        where = (f"GPU {best['device_id']}'s" if len(rows) == 1
                 else f"the kernel time of {len(rows)} GPUs (GPU {best['device_id']}:")
        title = (f"One kernel takes {pct(share)} of {where} kernel time" if len(rows) == 1
                 else f"One kernel takes up to {pct(share)} of {where} {pct(share)})")
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


RULE = Rule(
    id="NLE101",
    name="dominant-kernel",
    title="One kernel dominates its GPU's time",
    check=check,
    metric_ids=("top_kernels", "categories", "compute_efficiency", "gemm_precision"),
)
