"""GPU idle behind the host: kernel launches (NLE209) and other host work (NLE210), with
what they share: what the launching thread did in that time (diagnosis/evidence.py), the
advice of the family of host work that holds most of it, and the phases whose kernels start
as soon as they are launched. Idle time a read-back (NLE214) or a per-layer sync stall
(NLE217) already counts is not counted again."""

from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.evidence import host_sources, host_work_lines, lead_family
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.results.launches import LaunchOverhead, LaunchStorm
from nsys_llm_explainer.rules.advice import HOST_FAMILY_TOPIC, advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, pct, us
from nsys_llm_explainer.rules.impact import cause_finding
from nsys_llm_explainer.rules.sync import layer_syncs_reported, readbacks_reported, selected


def host_recommendations(view: RuleInput, default_topic: str) -> tuple[str, ...]:
    """Advice for host-caused idle time: the advice of the family that holds most of it
    (diagnosis/evidence.py lead_family), then `default_topic`'s; the capture hint when
    nothing names the host's work."""
    ic = view.metric("idle_causes")
    devices = [d.device_id for d in view.acct.devices]
    hs = host_sources(ic.data if ic is not None else None, devices)
    family = lead_family(hs)
    out = list(advice(HOST_FAMILY_TOPIC[family], view.workload)) if family in HOST_FAMILY_TOPIC else []
    for line in advice(default_topic, view.workload):
        if line not in out:
            out.append(line)
    return tuple(out)


def host_evidence(view: RuleInput) -> list[str]:
    """What the launching thread did in the host-caused idle time (diagnosis/evidence.py host_work_lines)."""
    ic = view.metric("idle_causes")
    devices = [d.device_id for d in view.acct.devices]
    return host_work_lines(host_sources(ic.data if ic is not None else None, devices),
                              view.metric("operators") is not None)


def readback_after(view: RuleInput, bucket: Bucket) -> dict[int, int]:
    """Per device: the `bucket` idle time (launch_bound or host_other) the read-back finding
    (NLE214) and the per-layer sync stall finding (NLE217) already count, after calls that
    drained the queue (not counted twice)."""
    hp = view.metric("host_patterns")
    out: dict[int, int] = {}
    for key, rule_id, reports in (("scalar_readbacks", "NLE214", readbacks_reported),
                                  ("layer_syncs", "NLE217", layer_syncs_reported)):
        src = (hp.data.get(key) or {}) if hp is not None else {}
        if not src.get("count") or not selected(view, rule_id) or not reports(view):
            continue
        for d in src.get("devices", []):
            out[d["device_id"]] = out.get(d["device_id"], 0) + int(d.get("after_by_cause", {}).get(bucket, 0))
    return out


WAITING_PCT = 50.0  # of a phase's launches starting within boundness' HOST_QUEUE_NS


def host_bound_phases(view: RuleInput) -> list[str]:
    """Evidence: the phases whose kernels mostly start as soon as they are launched (the GPU
    waits on the host there), with their queue time (boundness). Not their busy share: over
    the phase's ranges, not the device's window, it would be a second busy figure for the same
    GPU on the first screen (the key numbers hold the one; the boundness section the rest)."""
    res = view.metric("boundness")
    if res is None:
        return []
    limit = us(res.data["thresholds"]["host_queue_ns"])
    return [
        f"phase {p['phase']}: {p['immediate_start_pct']:.0f}% of its kernels start within {limit} of their "
        f"launch (median {us(p['queue_p50_ns'])}): the GPU waits on the host there; {p['launch_calls']:,} "
        "launches"
        for p in res.data["phases"] if p["immediate_start_pct"] >= WAITING_PCT
    ]


def idle_launch_bound(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU idles while the host is inside kernel launch calls: launch-bound.

    Impact: per device, the idle time idle_causes labels launch_bound (a launch call of a
    process that drives the device is in flight and nothing with a higher precedence covers
    the time). Evidence: the launch rate and kernel durations (launch_storm) and the launch
    overhead per process (launch_overhead), and the phases whose kernels mostly start as
    soon as they are launched (boundness' queue times). The advice follows what the launching
    thread was in (NLE210), then launch advice. Severity from the impact bands
    (rules/impact.py). On a start-up capture only the steady part counts (lazy module loading
    makes first launches slow: that is start-up's, NLE216).

    Example:

        NLE209 high: GPU idle while the host launches kernels (31.0% of GPU 0's time)
        - GPU 0: 310.000 ms idle while launch calls were in flight (31.0% of its window)
        - 1,204,113 kernels at 182,300 per second, median 4.1 us, 88.0% under 10 us
    """
    evidence = []
    ls = view.result(LaunchStorm)
    if ls is not None:
        g = ls.global_
        evidence.append(f"{g.kernels:,} kernels at {g.launches_per_s:,.0f} per second, median "
                        f"{us(g.p50_ns)}, {pct(g.pct_under_10us)} under 10 µs")
    lo = view.result(LaunchOverhead)
    if lo is not None:
        for p in lo.processes[:3]:
            if p.launch_calls:
                evidence.append(f"process {p.pid}: {p.launch_calls:,} launch calls, launch API time "
                                f"p50 {us(p.api_p50_ns)}")
    evidence += host_bound_phases(view)
    f = cause_finding(
        view,
        rule,
        buckets=(Bucket.LAUNCH_BOUND,),
        cause=Cause.HOST,
        title="GPU idle while the host launches kernels ({pct} of {where} time)",
        what="idle while launch calls were in flight",
        evidence=evidence,
        recommendations=host_recommendations(view, "launch"),
        confidence=Confidence.MEDIUM,
        subtract=readback_after(view, Bucket.LAUNCH_BOUND),
    )
    if f is not None:
        yield f


NLE209 = Rule(
    id="NLE209",
    name="idle-launch-bound",
    title="GPU idle behind kernel launches",
    check=idle_launch_bound,
    metric_ids=("idle_causes", "launch_storm", "launch_overhead", "boundness"),
)


def idle_host_work(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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


NLE210 = Rule(
    id="NLE210",
    name="idle-host-work",
    title="GPU idle behind host work",
    check=idle_host_work,
    metric_ids=("idle_causes", "boundness"),
)


RULES = (NLE209, NLE210)
