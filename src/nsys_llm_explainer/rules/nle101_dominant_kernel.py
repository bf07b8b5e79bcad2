from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.metrics.communication import COMM_PATTERN
from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, us
from nsys_llm_explainer.rules.impact import band, per_device

SHARE_PCT = 25.0  # of the kernel time of its own device
MIN_DEVICE_PCT = 10.0  # devices with less kernel time than this share of the busiest one are skipped


def device_kernel_ns(view: RuleInput, kernels: list[dict[str, Any]]) -> dict[int, int]:
    """Kernel time per device: categories' per-device totals, else the kernel rows' sums."""
    cats = view.metric("categories")
    if cats is not None and cats.data.get("by_device"):
        return {d["device_id"]: int(d["total_ns"]) for d in cats.data["by_device"]}
    out: dict[int, int] = {}
    for k in kernels:
        out[k["device_id"]] = out.get(k["device_id"], 0) + int(k["total_ns"])
    return out


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One kernel takes a large share of its GPU's kernel time.

    Per device, the kernel (by name) with the most time on that device, communication kernels
    left out (they mostly wait, and NLE307 reports them); it fires when it holds
    at least 25% of that device's kernel time (never divided by other devices' time, so it can
    fire on an 8-GPU trace). Devices with less than 10% of the busiest device's kernel time are
    skipped (one warm-up kernel would otherwise always dominate its device). One finding per
    kernel name, listing every device where it dominates. Impact: its time on those devices
    (the ceiling of what optimizing it can give back), over their windows; severity from the
    impact bands (rules/impact.py). Optimizing that kernel (tile shapes, a fused or vendor
    kernel, a different precision) moves the whole GPU-side number.

    Example:

        NLE101 high: One kernel takes 61.2% of GPU 0's kernel time
        - ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn: 61.2% of GPU 0's 1,327.400 ms of kernel time
        - 4,096 calls, 812.345 ms total, p50 190.1 us, max 402.7 us
    """
    res = view.metric("top_kernels")
    if res is None or not res.data["kernels"]:
        return
    totals = device_kernel_ns(view, res.data["kernels"])
    top: dict[int, dict[str, Any]] = {}
    comm = re.compile(COMM_PATTERN, re.IGNORECASE)
    for k in res.data["kernels"]:  # sorted by time: the first row per device is its top kernel
        if not comm.search(k["name"]):  # collectives mostly wait: NLE307 reports them
            top.setdefault(k["device_id"], k)
    busiest = max(totals.values(), default=0)
    by_name: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for dev, k in top.items():
        if totals.get(dev, 0) < MIN_DEVICE_PCT / 100.0 * busiest:
            continue  # a device that ran a warm-up kernel or two says nothing about the run
        share = 100.0 * k["total_ns"] / totals[dev] if totals.get(dev) else 0.0
        if share >= SHARE_PCT:
            by_name.setdefault(k["name"], []).append((k, share))
    for name, rows in by_name.items():
        affected, impact = per_device(view.acct, {k["device_id"]: int(k["total_ns"]) for k, _ in rows})
        severity = band(impact[1])
        if severity is None:
            continue
        best, share = max(rows, key=lambda r: r[1])
        where = (f"GPU {best['device_id']}'s" if len(rows) == 1
                 else f"the kernel time of {len(rows)} GPUs (GPU {best['device_id']}:")
        yield rule.finding(
            severity,
            Confidence.HIGH,
            [
                *(f"{view.kernel_label(name)}: {pct(s)} of GPU {k['device_id']}'s "
                  f"{ms(totals[k['device_id']])} of kernel time" for k, s in rows[:8]),
                f"{best['calls']:,} calls, {ms(best['total_ns'])} total, p50 {us(best['p50_ns'])}, "
                f"max {us(best['max_ns'])}",
            ],
            [
                "Profile this kernel with Nsight Compute (the command is in ncu_plan.sh when written, "
                "else `ncu --kernel-name regex:NAME --launch-skip 10 --launch-count 1 --set full`) to see "
                "whether it is memory- or compute-bound.",
                "Check its launch shapes: GEMMs with a tiny M (small batches) leave tensor cores idle; "
                "batching more work or a split-K/stream-K kernel helps.",
            ],
            title=(f"One kernel takes {pct(share)} of {where} kernel time" if len(rows) == 1
                   else f"One kernel takes up to {pct(share)} of {where} {pct(share)})"),
            affected=affected, impact=impact, cause="compute",
        )


RULE = Rule("NLE101", "dominant-kernel", "One kernel dominates its GPU's time", check, ("top_kernels", "categories"))
