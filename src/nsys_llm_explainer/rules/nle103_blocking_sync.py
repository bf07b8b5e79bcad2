from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms
from nsys_llm_explainer.rules.idle_cause_common import cause_finding
from nsys_llm_explainer.rules.sync_sources import SOURCE_RULES, explained, remaining_by_api, reported

MAX_APIS = 3


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU idles while the host is blocked in synchronizing calls.

    Impact: per device, the idle time idle_causes labels sync_wait (a blocking synchronize or
    a host-blocking copy call of a process that drives the device is in flight, or its refill
    launch right after), minus what the reported specific findings explain: scalar read-backs
    (NLE214), one synchronize per launch (NLE215) and synchronous copies (NLE305), taken as
    their union (rules/sync_sources.py), never their sum. The host's own wait while the GPU
    runs work or copies costs nothing and is never counted. Evidence names the blocking APIs
    whose calls hold the time counted here. Severity from the impact bands (rules/impact.py).

    Example:

        NLE103 medium: GPU idle while the host waits in synchronize calls (6.3% of GPU 0's time)
        - GPU 0: 21.684 ms idle while a synchronizing call was in flight (6.3% of its window)
        - counted here, inside the calls (and the launch right after them): cudaStreamSynchronize 20.912 ms
        - not counted here: 10.928 ms explained by NLE215
    """
    sources = reported(view)
    specific = explained(view, sources)
    evidence = []
    apis = remaining_by_api(view, sources, {d.device_id for d in view.acct.devices})
    if apis:
        evidence.append("counted here, inside the calls (and the launch right after them): " + ", ".join(
            f"{api} {ms(ns)}" for api, ns in apis[:MAX_APIS]))
    if specific:
        rules = "/".join(SOURCE_RULES[s] for s in sorted(sources, key=lambda s: SOURCE_RULES[s]))
        evidence.append(f"not counted here: {ms(sum(specific.values()))} explained by {rules}")
    f = cause_finding(
        view,
        rule,
        buckets=(Bucket.SYNC_WAIT,),
        cause=Cause.SYNC,
        title="GPU idle while the host waits in synchronize calls ({pct} of {where} time)",
        what="idle while a synchronizing call was in flight",
        evidence=evidence,
        recommendations=advice("sync", view.workload),
        confidence=Confidence.HIGH,
        subtract=specific,
    )
    if f is not None:
        yield f


RULE = Rule(
    id="NLE103",
    name="blocking-sync",
    title="GPU idle behind blocking synchronization",
    check=check,
    metric_ids=("idle_causes", "host_patterns"),
)
