from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms
from nsys_llm_explainer.rules.idle_cause_common import cause_finding


def specific_sync_costs(view: RuleInput) -> dict[int, int]:
    """Per device, sync_wait idle time already reported by NLE214 (read-backs) and NLE215
    (one sync per launch), so NLE103 does not count it again."""
    out: dict[int, int] = {}
    hp = view.metric("host_patterns")
    if hp is None:
        return out
    sources = [hp.data["sync_per_launch"]] if hp.data["sync_per_launch"]["found"] else []
    if hp.data.get("scalar_readbacks"):
        sources.append(hp.data["scalar_readbacks"])
    for src in sources:
        for d in src["devices"]:
            out[d["device_id"]] = out.get(d["device_id"], 0) + int(d["idle_ns"])
    return out


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU idles while the host is blocked in synchronizing calls.

    Impact: per device, the idle time idle_causes labels sync_wait (a blocking synchronize or
    a host-blocking copy call of a process that drives the device is in flight, or its refill
    launch right after), minus what NLE214 (scalar read-backs) and NLE215 (one synchronize per
    launch) already report. The host's own wait while the GPU runs kernels or copies costs
    nothing and is never counted. Severity from the impact bands (rules/impact.py).

    Example:

        NLE103 medium: GPU idle while the host waits in synchronize calls (6.3% of GPU 0's time)
        - GPU 0: 21.684 ms idle while a synchronizing call was in flight (6.3% of its window)
        - blocking calls: cudaDeviceSynchronize x1,312 (301.653 ms), cudaMemcpy x279 (17.671 ms)
    """
    sync = view.metric("sync")
    evidence = []
    if sync is not None:
        blocking = [c for c in sync.data["calls"] if c["blocking"]][:3]
        if blocking:
            evidence.append("blocking calls: " + ", ".join(
                f"{c['api']} x{c['calls']:,} ({ms(c['total_ns'])})" for c in blocking))
    specific = specific_sync_costs(view)
    if specific:
        evidence.append(f"not counted here: {ms(sum(specific.values()))} explained by NLE214/NLE215")
    f = cause_finding(
        view, rule, ("sync_wait",), "sync",
        "GPU idle while the host waits in synchronize calls ({pct} of {where} time)",
        "idle while a synchronizing call was in flight", evidence, advice("sync", view.workload),
        Confidence.HIGH, subtract=specific,
    )
    if f is not None:
        yield f


RULE = Rule("NLE103", "blocking-sync", "GPU idle behind blocking synchronization", check, ("idle_causes", "sync"))
