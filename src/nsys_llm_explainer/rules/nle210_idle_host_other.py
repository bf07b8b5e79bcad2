from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import (
    cause_finding,
    host_bound_phases,
    host_evidence,
    host_recommendations,
    readback_after,
)


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU idles while the host does other work (Python, scheduling, I/O, host compute, or
    CUDA calls other than launches, copies and syncs, such as allocation) and nothing is queued.

    Impact: per device, the idle time idle_causes labels host_other: the host is visible (inside
    its first-to-last CUDA call window) but in no copy, communication, synchronizing or launch
    call (other CUDA calls, such as cudaMalloc or cudaFree, count here). What the host does there
    is mostly not in a CUDA trace; the recommendation says how to see it.
    Evidence names what the launching thread was in during that time (idle_causes' host
    sources: ranges, OS calls, CUDA calls, Python frames, CPU samples) and the phases whose
    kernels mostly start as soon as they are launched (boundness' queue times); the advice
    follows the family of the source that holds the most of it (data loading, the optimizer
    step, a read-back, allocation ...), else says how to see the host's work. Time after a
    read-back that drained the queue is counted by NLE214 when it reports, not here.
    Severity from the impact bands (rules/impact.py). On a start-up capture only the
    steady part counts (the time before it is NLE216's).

    Example:

        NLE210 low: GPU idle while the host does other work (4.8% of GPU 0's time)
        - GPU 0: 16.529 ms idle while the host made no launch, copy or sync call (4.8% of its window)
    """
    f = cause_finding(
        view,
        rule,
        buckets=(Bucket.HOST_OTHER,),
        cause=Cause.HOST,
        title="GPU idle while the host does other work ({pct} of {where} time)",
        what="idle while the host made no launch, copy or sync call",
        evidence=[*host_evidence(view), *host_bound_phases(view)],
        recommendations=host_recommendations(view, "host"),
        confidence=Confidence.MEDIUM,
        subtract=readback_after(view, Bucket.HOST_OTHER),
    )
    if f is not None:
        yield f


RULE = Rule(
    id="NLE210",
    name="idle-host-work",
    title="GPU idle behind host work",
    check=check,
    metric_ids=("idle_causes", "boundness"),
)
