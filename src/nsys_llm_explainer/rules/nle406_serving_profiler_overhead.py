from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct
from nsys_llm_explainer.rules.serving_common import serving

HOST_SHARE_PCT = 50.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A serving capture that looks host-bound was made with profiler options that inflate
    host time.

    Fires (a note) when the serving metric lists profiler overhead (Python stack tracing,
    memory profiling, shape recording) and the main phase (decode, else mixed, else prefill)
    has a host share of at least 50%: the host-side figures are an upper bound, and a capture
    without those options says how much of the host time is the engine's own.

    Example:

        NLE406 info: Host-bound serving captured with Python stack tracing (15,230 Python function events)
    """
    s = serving(view)
    if s is None or not s.profiler_overhead or not s.phases:
        return
    main = s.phase("decode") or s.phase("mixed") or s.phase("prefill")
    if main is None or (main.host_share_pct or 0.0) < HOST_SHARE_PCT:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[f"{main.phase}: the host holds {pct(main.host_share_pct or 0.0)} of its time",
                  f"captured with {' and '.join(s.profiler_overhead)}"],
        recommendation=["Capture again without `with_stack`, `profile_memory` and `record_shapes` (or with "
                        "Nsight Systems and NVTX only) before acting on the host-bound figures."],
        title=f"Host-bound serving captured with {s.profiler_overhead[0]}",
    )


RULE = Rule(
    id="NLE406",
    name="serving-profiler-overhead",
    title="Serving capture with host-inflating profiler options",
    check=check,
    metric_ids=("serving",),
)
