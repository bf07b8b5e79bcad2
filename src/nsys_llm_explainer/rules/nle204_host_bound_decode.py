from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct, us

DECODE_WORD = "decode"
RECOMMENDATIONS = (
    "Capture the decode step in a CUDA graph (e.g. vLLM/SGLang CUDA graph mode, "
    "torch.cuda.CUDAGraph, torch.compile mode='reduce-overhead'): one launch per step.",
    "Launch fewer, fused kernels per token (fused attention, norm and activation kernels).",
    "Raise the decode batch size (more concurrent sequences) so each kernel does more work per "
    "launch.",
    "Move scheduling, sampling and detokenization off the launching thread, or overlap them "
    "with the GPU work of the previous step.",
)


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The decode phase is host-bound: the GPU waits for kernels to be launched.

    Uses the boundness verdict of each phase whose name contains "decode" (from --phase-map
    or --step-range): host_bound means the median queue time (kernel start - launch call end)
    is under 20 us and the GPU is busy less than 60% of the phase's NVTX time. Severity
    follows the verdict's confidence (high -> high, otherwise medium).

    Example:

        NLE204 high: Decode is host-bound: the GPU is busy 31.0% of decode time
        - 51,200 launches; queue time p50 2.1 us (92.0% start within 20 us of the launch)
        - GPU busy (kernels and copies) 31.0% of the decode ranges
    """
    res = view.metric("boundness")
    if res is None:
        return
    for p in res.data["phases"]:
        if DECODE_WORD not in str(p["phase"]).lower() or p["verdict"] != "host_bound":
            continue
        conf = Confidence(p["confidence"])
        yield rule.finding(
            Severity.HIGH if conf is Confidence.HIGH else Severity.MEDIUM,
            conf,
            [
                f"{p['launch_calls']:,} launches; queue time p50 {us(p['queue_p50_ns'])} "
                f"({pct(p['immediate_start_pct'])} start within 20 us of the launch)",
                f"GPU busy (kernels and copies) {pct(p['gpu_busy_pct'])} of the {p['phase']} "
                "ranges",
            ],
            list(RECOMMENDATIONS),
            title=f"{str(p['phase']).capitalize()} is host-bound: the GPU is busy "
            f"{pct(p['gpu_busy_pct'])} of {p['phase']} time",
        )


RULE = Rule("NLE204", "host-bound-decode", "Host-bound decode", check, ("boundness",))
