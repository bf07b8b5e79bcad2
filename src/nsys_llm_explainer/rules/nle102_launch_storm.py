from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.metrics.launch_storm import SEVERE_STORM_RATE_PER_S
from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct, us


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Kernel launch storm: very many short kernels per second.

    Fires (globally, or for any single process) when kernels are launched at >= 50,000 per
    second with a median duration <= 10 us, or >= 100,000 per second with a median <= 20 us
    (thresholds in `metrics/launch_storm.py`). At these rates the CPU cost of each launch
    (a few microseconds) is as large as the kernels themselves, so the GPU waits on the host.
    High severity at >= 100,000 launches per second, medium below.

    Example:

        NLE102 high: Kernel launch storm: 182,300 launches/s, median kernel 4.1 us
        - process 4242: 1,204,113 kernels in 6.605 s of kernel activity
        - 71.3% of kernels run under 5 us, 88.0% under 10 us
    """
    res = view.metric("launch_storm")
    if res is None:
        return
    scopes = [("all processes", res.data["global"])]
    if len(res.data["processes"]) > 1:
        scopes += [(f"process {p['pid']}", p) for p in res.data["processes"]]
    for label, s in scopes:
        if not s["storm"]:
            continue
        rate = float(s["launches_per_s"])
        severity = Severity.HIGH if rate >= SEVERE_STORM_RATE_PER_S else Severity.MEDIUM
        yield rule.finding(
            severity,
            Confidence.HIGH if s["kernels"] >= 1000 else Confidence.MEDIUM,
            [
                f"{label}: {s['kernels']:,} kernels in {s['window_ns'] / 1e9:,.3f} s of kernel activity",
                f"{rate:,.0f} launches/s, median kernel {us(s['p50_ns'])}",
                f"{pct(s['pct_under_5us'])} of kernels run under 5 us, {pct(s['pct_under_10us'])} under 10 us",
            ],
            [
                "Capture the decode loop in CUDA graphs (vLLM/SGLang: keep cuda graphs enabled; "
                "PyTorch: torch.cuda.graphs or torch.compile mode='reduce-overhead').",
                "Fuse elementwise chains (torch.compile, custom fused kernels) to cut the kernel count.",
                "Increase the batch size so each launch does more work.",
            ],
            title=f"Kernel launch storm ({label}): {rate:,.0f} launches/s, median kernel {us(s['p50_ns'])}",
        )


RULE = Rule("NLE102", "launch-storm", "Kernel launch storm", check, ("launch_storm",))
