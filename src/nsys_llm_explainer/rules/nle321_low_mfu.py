from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct
from nsys_llm_explainer.rules.impact import band
from nsys_llm_explainer.rules.utilization_common import phase_line, phase_stake

LOW_MFU_PCT = 30.0  # compute-heavy phases (prefill, training) below this MFU


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A compute-heavy phase (prefill, training or plain forward steps) runs at a low MFU.

    Reads model_utilization's phases: MFU = model FLOPs per step / (step time x the GPU's
    dense peak for the model's dtype x GPUs), from --model config.json or
    --model-flops-per-token and the tokens per step. Fires per compute-heavy phase below 30%
    MFU. Impact: the phase's time x (1 - MFU) on each of its devices, the time it would give
    back at the peak (a ceiling); severity from the impact bands (rules/impact.py). The
    evidence lists every input the figure used, the hardware FLOPs utilisation of the
    measured operators when there is one, and how much kernel time memory-bound operators
    took (compute_efficiency). A phase whose figures failed a plausibility check (its
    `warnings`: an HFU below MFU means the model FLOPs count work the steps did not run)
    gets low confidence and the warning in its evidence.

    Example:

        NLE321 high: Phase 'step' (prefill) runs at 12.9% MFU
        - phase 'step' (prefill, 1 steps, 47.151 ms): MFU 12.9%
        - tokens per step: the token embedding's input [16, 559]
        - FLOPs per token: qwen1.5-0.5b.json: 2 x 308,281,344 (no LM head) + attention over 559 keys
        - LM head: left out: no matrix product of the step has the vocabulary dimension 151,936 ...
        - measured operator FLOPs reach 12.3% of the peak (HFU)
        - memory-bound operators (no FLOPs) take 44.4% of the kernel time
    """
    res = view.metric("model_utilization")
    if res is None:
        return
    ce = view.metric("compute_efficiency")
    memory = next((f for f in ce.data["by_family"] if f["family"] == "memory"), None) if ce else None
    for ph in res.data["phases"]:
        mfu = ph.get("mfu_pct")
        if not ph["compute_heavy"] or mfu is None or mfu >= LOW_MFU_PCT:
            continue
        affected, impact = phase_stake(view, ph, float(mfu))
        severity = band(impact[1])
        if severity is None:
            continue
        evidence = [phase_line(ph, "MFU", float(mfu), ph.get("mfu_min_pct"), ph.get("mfu_max_pct"))]
        evidence += [f"  {line}" for line in ph["inputs"]]
        if ph.get("hfu_pct") is not None:
            evidence.append(f"measured operator FLOPs reach {pct(ph['hfu_pct'])} of the peak (HFU)")
        if memory is not None:
            share = pct(memory["pct_of_kernel_time"])
            evidence.append(f"memory-bound operators (no FLOPs) take {share} of the kernel time")
        evidence += [f"warning: {w}" for w in ph.get("warnings", [])]
        assumed = any("assumed" in line for line in ph["inputs"]) or bool(ph.get("warnings"))
        yield rule.finding(
            severity=severity,
            confidence=Confidence.LOW if assumed else Confidence.MEDIUM,
            evidence=evidence,
            recommendation=advice("mfu", view.workload),
            title=f"Phase {ph['phase']!r} ({ph['kind']}) runs at {pct(float(mfu))} MFU",
            affected=affected,
            impact=impact,
            cause=Cause.COMPUTE,
        )


RULE = Rule(
    id="NLE321",
    name="low-mfu",
    title="Compute-heavy phase with low MFU",
    check=check,
    metric_ids=("model_utilization", "compute_efficiency"),
)
