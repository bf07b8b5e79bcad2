from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct
from nsys_llm_explainer.rules.impact import band
from nsys_llm_explainer.rules.utilization_common import phase_line, phase_stake

LOW_MBU_PCT = 50.0  # decode phases below this MBU


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A memory-bound phase (decode) reads its weights and KV cache far below peak bandwidth.

    Reads model_utilization's decode phases: MBU = bytes a step must read (every weight
    it uses and the KV cache, from --model config.json with the step's batch and key length)
    / (step time x the GPU's peak bandwidth x GPUs). A decode step does little arithmetic per
    byte, so its floor is the time to stream those bytes; a low MBU means the step's time goes
    to launches, host work, small kernels or idle gaps instead. Fires per decode phase below
    50% MBU. Impact: the phase's time x (1 - MBU) on each of its devices (a ceiling); severity
    from the impact bands (rules/impact.py). A phase whose figures failed a plausibility
    check (its `warnings`) gets low confidence and the warning in its evidence.

    Example:

        NLE322 high: Phase 'decode' reads weights and KV cache at 21.4% of peak bandwidth
        - phase 'decode' (decode, 512 steps, 1,024.000 ms): MBU 21.4% (steps 18.0% to 25.1%)
        - bytes per step: qwen1.5-0.5b.json: bf16 weights + KV cache at 1,024 keys, batch 16
    """
    res = view.metric("model_utilization")
    if res is None:
        return
    for ph in res.data["phases"]:
        mbu = ph.get("mbu_pct")
        if ph["kind"] != "decode" or mbu is None or mbu >= LOW_MBU_PCT:
            continue
        affected, impact = phase_stake(view, ph, float(mbu))
        severity = band(impact[1])
        if severity is None:
            continue
        per_step = [float(s["mbu_pct"]) for s in res.data["steps"]
                    if s["phase"] == ph["phase"] and s.get("mbu_pct") is not None]
        lo, hi = (min(per_step), max(per_step)) if per_step else (None, None)
        evidence = [phase_line(ph, "MBU", float(mbu), lo, hi)]
        evidence += [f"  {line}" for line in ph["inputs"]]
        if ph.get("mfu_pct") is not None:
            evidence.append(f"MFU of the same steps: {pct(ph['mfu_pct'])}")
        evidence += [f"warning: {w}" for w in ph.get("warnings", [])]
        assumed = any("assumed" in line or "lower bound" in line for line in ph["inputs"])
        assumed = assumed or bool(ph.get("warnings"))
        yield rule.finding(
            severity=severity,
            confidence=Confidence.LOW if assumed else Confidence.MEDIUM,
            evidence=evidence,
            recommendation=advice("mbu", view.workload),
            title=f"Phase {ph['phase']!r} reads weights and KV cache at {pct(float(mbu))} of peak bandwidth",
            affected=affected,
            impact=impact,
            cause=Cause.COMPUTE,
        )


RULE = Rule(
    id="NLE322",
    name="low-mbu",
    title="Memory-bound (decode) phase with low MBU",
    check=check,
    metric_ids=("model_utilization",),
)
