from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct, shorten

HIGH_PCT = 50.0
MEDIUM_PCT = 25.0
# A device whose kernel time is below this share of the busiest device's is not judged: a
# GPU that ran one warm-up kernel would otherwise show that kernel at 100%.
MIN_DEVICE_PCT = 10.0


def device_shares(kernels: list[dict]) -> list[tuple[float, dict, int]]:
    """(share of its device's kernel time in %, row, that device's kernel time) per
    top_kernels row on a device with at least MIN_DEVICE_PCT of the busiest device's kernel
    time, largest share first (ties: more time first, then top_kernels order)."""
    per_device: dict[int, int] = {}
    for row in kernels:
        per_device[row["device_id"]] = per_device.get(row["device_id"], 0) + int(row["total_ns"])
    busiest = max(per_device.values(), default=0)
    out = []
    for row in kernels:
        dev_ns = per_device[row["device_id"]]
        if dev_ns <= 0 or 100.0 * dev_ns < MIN_DEVICE_PCT * busiest:
            continue
        share = 100.0 * int(row["total_ns"]) / dev_ns
        out.append((share, row, dev_ns))
    out.sort(key=lambda t: (-t[0], -int(t[1]["total_ns"])))
    return out


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One kernel takes a large share of its GPU's kernel time.

    Per device: the share of a kernel (by name, on one device) in the kernel time of that
    device, so that on an 8-GPU trace a kernel holding 60% of every GPU's time is seen (its
    share of all devices together could never pass 12.5%). Fires once, for the kernel with
    the largest share, when it holds at least 25% (medium) or 50% (high) of its device's
    kernel time; other devices where the same kernel passes 25% are named too. Devices with
    less than 10% of the busiest device's kernel time are not judged (one warm-up kernel on
    an otherwise idle GPU would be 100% of it). Optimizing
    that kernel (better tile shapes, a fused or vendor kernel, a different precision) moves
    the whole GPU-side number.

    Example:

        NLE101 high: One kernel takes 61.2% of GPU kernel time on device 0
        - ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn on device 0: 61.2% of device 0's 1,327.400 ms kernel time
        - 4,096 calls, 812.345 ms total, p50 190.1 us, max 402.7 us
        - the same kernel takes >= 25% on devices 1, 2, 3
    """
    res = view.metric("top_kernels")
    if res is None or not res.data["kernels"]:
        return
    ranked = device_shares(res.data["kernels"])
    if not ranked or ranked[0][0] < MEDIUM_PCT:
        return
    share, top, dev_ns = ranked[0]
    severity = Severity.HIGH if share >= HIGH_PCT else Severity.MEDIUM
    device = top["device_id"]
    evidence = [
        f"{shorten(top['name'])} on device {device}: {pct(share)} of device {device}'s "
        f"{ms(dev_ns)} kernel time",
        f"{top['calls']:,} calls, {ms(top['total_ns'])} total, p50 {top['p50_ns'] / 1e3:,.1f} us, "
        f"max {top['max_ns'] / 1e3:,.1f} us",
    ]
    also = sorted(
        r["device_id"]
        for s, r, _ in ranked[1:]
        if s >= MEDIUM_PCT and r["name"] == top["name"] and r["device_id"] != device
    )
    if also:
        evidence.append(
            f"the same kernel takes >= {MEDIUM_PCT:g}% on device{'s' if len(also) > 1 else ''} "
            + ", ".join(str(d) for d in also)
        )
    yield rule.finding(
        severity,
        Confidence.HIGH,
        evidence,
        [
            "Profile this kernel with Nsight Compute (`ncu --kernel-name regex:...`) to see whether "
            "it is memory- or compute-bound.",
            "Check its launch shapes: GEMMs with tiny M (decode batch) waste tensor cores; "
            "batching more requests or a split-K/stream-K kernel helps.",
        ],
        title=f"One kernel takes {pct(share)} of GPU kernel time on device {device}",
    )


RULE = Rule("NLE101", "dominant-kernel", "One kernel dominates GPU time", check, ("top_kernels",))
