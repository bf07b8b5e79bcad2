from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

HIGH_PCT = 50.0
MEDIUM_PCT = 25.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One kernel takes a large share of all GPU kernel time.

    Fires when the kernel (by name, on one device) with the most total time holds at least
    25% (medium) or 50% (high) of all kernel time in the trace. Optimizing that kernel
    (better tile shapes, a fused or vendor kernel, a different precision) moves the whole
    GPU-side number.

    Example:

        NLE101 high: One kernel takes 61.2% of GPU kernel time
        - ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_tn on device 0: 61.2% of 1,327.400 ms kernel time
        - 4,096 calls, 812.345 ms total, p50 190.1 us, max 402.7 us
    """
    res = view.metric("top_kernels")
    if res is None or not res.data["kernels"]:
        return
    top = res.data["kernels"][0]
    share = float(top["pct_of_kernel_time"])
    if share < MEDIUM_PCT:
        return
    severity = Severity.HIGH if share >= HIGH_PCT else Severity.MEDIUM
    yield rule.finding(
        severity,
        Confidence.HIGH,
        [
            f"{view.kernel_label(top['name'])} on device {top['device_id']}: {pct(share)} of "
            f"{ms(res.data['total_kernel_ns'])} kernel time",
            f"{top['calls']:,} calls, {ms(top['total_ns'])} total, p50 {top['p50_ns'] / 1e3:,.1f} us, "
            f"max {top['max_ns'] / 1e3:,.1f} us",
        ],
        [
            "Profile this kernel with Nsight Compute (`ncu --kernel-name regex:...`) to see whether "
            "it is memory- or compute-bound.",
            "Check its launch shapes: GEMMs with tiny M (decode batch) waste tensor cores; "
            "batching more requests or a split-K/stream-K kernel helps.",
        ],
        title=f"One kernel takes {pct(share)} of GPU kernel time",
    )


RULE = Rule("NLE101", "dominant-kernel", "One kernel dominates GPU time", check, ("top_kernels",))
