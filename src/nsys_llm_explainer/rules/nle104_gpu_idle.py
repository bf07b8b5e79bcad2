from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

HIGH_PCT = 40.0
MEDIUM_PCT = 20.0
COPIES_EXPLAIN_PCT = 50.0  # above this share of idle covered by copies, say copies explain it


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A GPU sits idle (no kernel running) for a large share of its active window.

    Per device: idle = window (first kernel start to last kernel end) minus the union of
    kernel intervals. Fires at >= 20% (medium) or >= 40% (high). When memcpy/memset work on
    the same device covers more than half of that idle time, the finding says so and lowers
    its severity one step: the GPU is copying, not starving.

    Example:

        NLE104 high: GPU 0 idle 62.4% of its kernel window
        - window 1,000.000 ms, busy 376.000 ms, 4,321 gaps
        - copies cover 3.2% of the idle time
    """
    res = view.metric("gpu_idle")
    if res is None:
        return
    for d in res.data["devices"]:
        idle = float(d["idle_pct"])
        if idle < MEDIUM_PCT:
            continue
        severity = Severity.HIGH if idle >= HIGH_PCT else Severity.MEDIUM
        covered = float(d["idle_covered_by_copies_pct"])
        evidence = [
            f"window {ms(d['window_end_ns'] - d['window_start_ns'])}, busy {ms(d['busy_ns'])}, "
            f"{d['gap_count']:,} gaps",
            f"copies (memcpy/memset) cover {pct(covered)} of the idle time",
        ]
        recs = [
            "Look at the largest gaps (gpu_idle_gaps.csv) in the Nsight Systems timeline: what is the "
            "launching thread doing there?",
            "Host-side work between steps (scheduling, sampling, detokenization) shows up as idle: "
            "overlap it with GPU work or move it off the launch thread.",
        ]
        if covered >= COPIES_EXPLAIN_PCT:
            severity = Severity.MEDIUM if severity is Severity.HIGH else Severity.LOW
            evidence.append("most of this idle time is data transfer, not a starving GPU")
            recs.insert(
                0, "Overlap copies with compute (separate streams, pinned memory) or avoid them."
            )
        yield rule.finding(
            severity,
            Confidence.HIGH,
            evidence,
            recs,
            title=f"GPU {d['device_id']} idle {pct(idle)} of its kernel window",
        )


RULE = Rule("NLE104", "gpu-idle", "GPU idle between kernels", check, ("gpu_idle",))
