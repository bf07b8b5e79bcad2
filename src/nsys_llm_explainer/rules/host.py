"""GPU idle behind the host: what the host did instead of feeding the GPU.

Kernel launches (NLE209) and other host work (NLE210), with what they share: what the
launching thread did in that time (diagnosis/evidence.py), the advice of the family of host
work that holds most of it, and the phases whose kernels start as soon as they are launched.
Idle time a read-back (NLE214) or a per-layer sync stall (NLE217) already counts is not
counted again.

Host synchronization: GPU idle behind blocking synchronization (NLE103), read-backs (NLE214),
one synchronize per launch (NLE215), a copy and a synchronize in every layer (NLE217),
synchronous copies on the launching thread (NLE305).

Which of these host-blocking sources have a finding of their own, and the sync_wait time they
explain together, so NLE103 (blocking synchronization) and NLE208 (copies) count only what the
reported findings leave. The sources (host_patterns): scalar read-backs (NLE214), per-layer
sync stalls (NLE217), one synchronize per launch (NLE215) and synchronous copies (NLE305). A
source counts as reported when its rule is selected (--select/--ignore) and its check yields a
finding. Their sync_wait time can overlap, so the time they explain is the union, read from
host_patterns' sync_wait_pieces (each piece of a device's sync_wait time with the sources that
cover it)."""

from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.evidence import host_sources, host_work_lines, lead_family
from nsys_llm_explainer.diagnosis.verdict import readback_text
from nsys_llm_explainer.fmt import size
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.results.devices import IdleCauses
from nsys_llm_explainer.results.host import (
    Boundness,
    HostPatterns,
    LayerSyncGroup,
    LayerSyncs,
    PerStep,
    ScalarReadbacks,
)
from nsys_llm_explainer.results.launches import LaunchOverhead, LaunchStorm
from nsys_llm_explainer.rules.advice import HOST_FAMILY_TOPIC, advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, ms, pct, us
from nsys_llm_explainer.rules.impact import (
    affected_devices,
    band,
    cause_finding,
    device_lines,
    hidden_graphs_cap,
    total_pct,
    where,
)


def host_recommendations(view: RuleInput, default_topic: str) -> tuple[str, ...]:
    """Advice for host-caused idle time: the advice of the family that holds most of it
    (diagnosis/evidence.py lead_family), then `default_topic`'s; the capture hint when
    nothing names the host's work."""
    devices = [d.device_id for d in view.acct.devices]
    hs = host_sources(view.result(IdleCauses), devices)
    family = lead_family(hs)
    out = list(advice(HOST_FAMILY_TOPIC[family], view.workload)) if family in HOST_FAMILY_TOPIC else []
    for line in advice(default_topic, view.workload):
        if line not in out:
            out.append(line)
    return tuple(out)


def host_evidence(view: RuleInput) -> list[str]:
    """What the launching thread did in the host-caused idle time (diagnosis/evidence.py host_work_lines)."""
    devices = [d.device_id for d in view.acct.devices]
    return host_work_lines(host_sources(view.result(IdleCauses), devices),
                              view.metric("operators") is not None)


def readback_after(view: RuleInput, bucket: Bucket) -> dict[int, int]:
    """Per device: the `bucket` idle time (launch_bound or host_other) the read-back finding
    (NLE214) and the per-layer sync stall finding (NLE217) already count, after calls that
    drained the queue (not counted twice)."""
    hp = view.result(HostPatterns)
    out: dict[int, int] = {}
    if hp is None:
        return out
    for src, rule_id, reports in ((hp.scalar_readbacks, "NLE214", readbacks_reported),
                                  (hp.layer_syncs, "NLE217", layer_syncs_reported)):
        if src is None or not src.count or not selected(view, rule_id) or not reports(view):
            continue
        for d in src.devices:
            out[d.device_id] = out.get(d.device_id, 0) + d.after_by_cause.get(bucket, 0)
    return out


WAITING_PCT = 50.0  # of a phase's launches starting within boundness' HOST_QUEUE_NS


def host_bound_phases(view: RuleInput) -> list[str]:
    """Evidence: the phases whose kernels mostly start as soon as they are launched (the GPU
    waits on the host there), with their queue time (boundness). Not their busy share: over
    the phase's ranges, not the device's window, it would be a second busy figure for the same
    GPU on the first screen (the key numbers hold the one; the boundness section the rest)."""
    b = view.result(Boundness)
    if b is None:
        return []
    limit = us(b.thresholds.host_queue_ns)
    return [
        f"phase {p.phase}: {p.immediate_start_pct:.0f}% of its kernels start within {limit} of their "
        f"launch (median {us(p.queue_p50_ns)}): the GPU waits on the host there; {p.launch_calls:,} "
        "launches"
        for p in b.phases if p.immediate_start_pct >= WAITING_PCT
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


SOURCE_RULES = {"scalar_readbacks": "NLE214", "layer_syncs": "NLE217", "sync_per_launch": "NLE215",
                "sync_copies": "NLE305"}


def selected(view: RuleInput, rule_id: str) -> bool:
    """The rule runs under --select/--ignore (the engine's test)."""
    opts = view.options
    if opts.select and not any(rule_id.startswith(s) for s in opts.select):
        return False
    return not any(rule_id.startswith(s) for s in opts.ignore)


def reported(view: RuleInput) -> set[str]:
    """The sources whose rule is selected and yields a finding."""
    by_id = {r.id: r for r in RULES}
    out = set()
    for source, rule_id in SOURCE_RULES.items():
        rule = by_id.get(rule_id)
        if rule is not None and selected(view, rule_id) and any(True for _ in rule.check(view, rule)):
            out.add(source)
    return out


def explained(view: RuleInput, sources: set[str]) -> dict[int, int]:
    """Per device: the sync_wait time covered by any of `sources` (their union)."""
    hp = view.result(HostPatterns)
    if hp is None or not sources:
        return {}
    out: dict[int, int] = {}
    for p in hp.sync_wait_pieces:
        if sources.intersection(p.sources):
            out[p.device_id] = out.get(p.device_id, 0) + p.idle_ns
    return out


def remaining_by_api(view: RuleInput, sources: set[str], devices: set[int]) -> list[tuple[str, int]]:
    """(API, sync_wait ns inside its blocking calls and their refill) that none of `sources`
    covers on `devices`, largest first; [] without host_patterns."""
    hp = view.result(HostPatterns)
    out: dict[str, int] = {}
    for p in hp.sync_wait_pieces if hp is not None else ():
        if p.device_id in devices and not sources.intersection(p.sources) and p.api:
            out[p.api] = out.get(p.api, 0) + p.idle_ns
    return sorted(((a, ns) for a, ns in out.items() if ns > 0), key=lambda t: (-t[1], t[0]))


MAX_APIS = 3


def blocking_sync(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU idles while the host is blocked in synchronizing calls.

    Impact: per device, the idle time idle_causes labels sync_wait (a blocking synchronize or
    a host-blocking copy call of a process that drives the device is in flight, or its refill
    launch right after), minus what the reported specific findings explain: scalar read-backs
    (NLE214), one synchronize per launch (NLE215) and synchronous copies (NLE305), taken as
    their union (explained(), rules/host.py), never their sum. The host's own wait while the GPU
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


NLE103 = Rule(
    id="NLE103",
    name="blocking-sync",
    title="GPU idle behind blocking synchronization",
    check=blocking_sync,
    metric_ids=("idle_causes", "host_patterns"),
)


READBACK_MIN_COUNT = 3
READBACK_MAX_GROUPS = 3
READBACK_HOLD_SHARE = 0.1


def _impact(src: ScalarReadbacks | LayerSyncs) -> dict[int, int]:
    """Per device: sync_wait idle while the calls were in flight, plus the host-late idle
    after they returned having drained the queue."""
    return {d.device_id: d.impact_ns for d in src.devices}


def _readbacks(view: RuleInput) -> ScalarReadbacks | None:
    """The read-backs, when there are at least READBACK_MIN_COUNT."""
    hp = view.result(HostPatterns)
    rb = hp.scalar_readbacks if hp is not None else None
    return rb if rb is not None and rb.count >= READBACK_MIN_COUNT else None


def readbacks_reported(view: RuleInput) -> bool:
    """Whether this rule yields a finding (other rules then leave its time to it)."""
    rb = _readbacks(view)
    if rb is None:
        return False
    _, share = total_pct(view.acct, affected_devices(view.acct, _impact(rb)))
    return band(share) is not None


def scalar_readbacks(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Read-backs: small device-to-host copies (at most 1 KiB) whose call blocks the host (a
    synchronous copy, or an async copy into pageable memory), or that a blocking synchronize
    follows on the same thread, as `.item()`, `.cpu()`, `.tolist()` or a Python `if` on a tensor
    produce. The host waits for the GPU's whole queue before it can queue anything else.

    Impact: per device, the sync_wait idle time while the copy call and its sync were in flight
    (plus the refill launch after them), and, when the read-back drained the queue, the idle
    time after it returned until the host launched the next work (launch_bound and host_other
    there are counted here, not by NLE209/NLE210); the host's wait while the GPU was busy
    costs nothing. At least 3 read-backs. Evidence: how many per step, the host time blocked
    and what the GPU did meanwhile (busy, idle with nothing queued, idle with work queued and
    waiting on something else), the idle time after the return, and where they come from (the
    outermost range below the step and the operator called, with the copy size). Severity from
    the impact bands (rules/impact.py). When that cost is below the bands but the read-backs
    block the host for at least 10% of the devices' time while the GPU sits idle just as long
    with queued work waiting on something else, a note (no time at stake) names them: the host
    could queue nothing more while it waited.

    Example:

        NLE214 high: 8 read-backs stall the GPU (64.4% of GPU 0's time)
        - GPU 0: 14.511 ms idle around read-backs (64.4% of its window)
        - a 4 B device-to-host copy into pageable memory in `aten::item`, 1 per step: 8 read-backs, the host
          blocked 7.320 ms in all (GPU meanwhile busy 7.280 ms, idle 21.0 us with nothing queued); idle after
          they returned until the host queued more work: 14.490 ms
    """
    rb = _readbacks(view)
    if rb is None:
        return
    affected = affected_devices(view.acct, _impact(rb))
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    held = _readbacks_holding(view, rb)
    if severity is None and held is None:
        return
    evidence = [*device_lines(affected, "idle around read-backs")]
    if held is not None:
        evidence.insert(0, held)
    for g in rb.groups[:READBACK_MAX_GROUPS]:
        queued = f", idle {dur(g.queued_during_ns)} with work queued waiting on something else" \
            if g.queued_during_ns else ""
        evidence.append(
            f"{readback_text(g, rb.per_step)}: {g.count:,} read-backs, the host blocked "
            f"{dur(g.host_blocked_ns)} in all (GPU meanwhile busy {dur(g.busy_ns)}, idle "
            f"{dur(g.idle_during_ns)} with nothing queued{queued}); idle after they returned until the host "
            f"queued more work: {dur(g.idle_after_ns)}")
    if rb.per_step is not None:
        evidence.append(per_step_line(rb.per_step))
    if not rb.groups and rb.ranges:
        evidence.append("around: " + ", ".join(f"{r.range!r} x{r.count:,}" for r in rb.ranges[:3]))
    if severity is None:  # they hold the host, but the GPU idle they provably cause is small
        yield rule.note(
            confidence=Confidence.MEDIUM,
            evidence=evidence,
            recommendation=advice("sync", view.workload),
            title=f"{rb.count:,} read-backs hold the host while the GPU waits on other work",
        )
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("sync", view.workload),
        title=f"{rb.count:,} read-backs stall the GPU ({share:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=(ns, share),
        cause=Cause.SYNC,
    )


def per_step_line(per: PerStep) -> str:
    return (f"per step: {per.median:g} at the median, {per.max:,} at most; "
            f"{per.with_readbacks:,} of {per.steps:,} steps have one")


def _readbacks_holding(view: RuleInput, rb: ScalarReadbacks) -> str | None:
    """A line when read-backs block the host for at least HOLD_SHARE of the devices' windows
    while the GPU sits idle with queued work (what they wait for waits on something else), else
    None."""
    window = view.acct.window()
    queued = rb.queued_during_ns
    hold = READBACK_HOLD_SHARE * window
    if not window or rb.host_blocked_ns < hold or queued < hold:
        return None
    blocked = rb.host_blocked_ns
    return (f"the host is blocked in read-backs for {dur(blocked)} ({100.0 * blocked / window:.1f}% of the devices' "
            f"time); meanwhile the GPU sat idle {dur(queued)} with its next work queued, waiting on "
            "something else, and the host could queue nothing more: time the read-back does not cause but keeps "
            "the host from using")


NLE214 = Rule(
    id="NLE214",
    name="scalar-readbacks",
    title="Read-backs stall the GPU",
    check=scalar_readbacks,
    metric_ids=("host_patterns",),
)


def sync_per_launch(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """One synchronize after each launch: the host launches a kernel, waits for it, launches
    the next, so the GPU drains and refills around every kernel.

    From host_patterns: blocking synchronize calls whose previous launch-or-sync call on the
    same thread was a launch, at least 10 of them and at least half the thread's launches.
    Impact: the sync_wait idle time those calls and their refill launches cover. Severity from
    the impact bands (rules/impact.py).

    Example:

        NLE215 low: One synchronize per launch: 1,312 syncs for 1,312 launches (3.8% of GPU 0's time)
        - GPU 0: 12.914 ms idle around the per-launch syncs (3.8% of its window)
        - cudaDeviceSynchronize x1,312 on 1 thread(s)
    """
    hp = view.result(HostPatterns)
    if hp is None or not hp.sync_per_launch.found:
        return
    spl = hp.sync_per_launch
    affected = affected_devices(view.acct, {d.device_id: d.idle_ns for d in spl.devices})
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    if severity is None:
        return
    evidence = [
        *device_lines(affected, "idle around the per-launch syncs"),
        ", ".join(f"{a.api} x{a.calls:,}" for a in spl.apis) + f" on {spl.threads} thread(s)",
    ]
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("sync", view.workload),
        title=(f"One synchronize per launch: {spl.syncs:,} syncs for {spl.launches:,} launches "
        f"({share:.1f}% of {where(affected)} time)"),
        affected=affected,
        impact=(ns, share),
        cause=Cause.SYNC,
    )


NLE215 = Rule(
    id="NLE215",
    name="sync-per-launch",
    title="One synchronize per launch",
    check=sync_per_launch,
    metric_ids=("host_patterns",),
)


LAYER_SYNC_MIN_COUNT = 3
LAYER_SYNC_MAX_GROUPS = 3
LAYER_SYNC_HOLD_SHARE = 0.1


def stalls(view: RuleInput) -> LayerSyncs | None:
    """The per-layer sync stalls, when there are at least LAYER_SYNC_MIN_COUNT."""
    hp = view.result(HostPatterns)
    st = hp.layer_syncs if hp is not None else None
    return st if st is not None and st.count >= LAYER_SYNC_MIN_COUNT else None


def layer_syncs_reported(view: RuleInput) -> bool:
    """Whether this rule yields a finding with time at stake (other rules then leave its time
    to it)."""
    st = stalls(view)
    if st is None:
        return False
    _, share = total_pct(view.acct, affected_devices(view.acct, _impact(st)))
    return band(share) is not None


def group_text(g: LayerSyncGroup, per_step: PerStep | None) -> str:
    """'a 8 B host-to-device copy from pageable memory, then cudaStreamSynchronize, in `layer_N`
    (32 layers), 32 per step: 128 stalls, the host blocked 260 ms in all (2.03 ms each)'."""
    unit = f" in `{g.unit}`" + (f" ({g.layers:,} layers)" if g.layers > 1 else "") if g.unit else ""
    steps = per_step.steps if per_step is not None else None
    each = f", {g.count // steps:,} per step" if steps and g.count % steps == 0 else ""
    return (f"a {g.bytes:,} B host-to-device copy from pageable memory, then {g.sync_api}{unit}{each}: "
            f"{g.count:,} stalls, the host blocked {dur(g.host_blocked_ns)} in all "
            f"({dur(g.host_blocked_ns // max(1, g.count))} each)")


def layer_sync_stall(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Per-layer sync stalls: a tiny host-to-device copy from pageable memory (at most 4 KiB: a
    Python value or list sent to the GPU) followed on the same thread by a blocking synchronize,
    the pair holding the host at least 1 ms, repeated (host_patterns layer_syncs). Once per
    layer, the host waits for the GPU's whole queue before it queues the next layer's work.

    Named with its count and host time: per group (the repeated range around it, `layer_N`,
    with the number of layers; the copy size; the synchronize's API) the count, how many per
    step, and the host time blocked. Impact: per device, the idle time with nothing queued
    while the calls were in flight, plus the idle time after they returned until the host
    queued more work (launch_bound and host_other there are counted here, not by NLE209 or
    NLE210; their sync_wait not by NLE103). At least 3 stalls. Severity from the impact bands
    (rules/impact.py); below them, a note when the stalls hold the host for at least 10% of the
    devices' time.

    Example:

        NLE217 medium: 128 per-layer sync stalls: a copy to the GPU, then a synchronize (12.9% of GPU 0's time)
        - GPU 0: 38.4 ms idle around the stalls (12.9% of its window)
        - a 8 B host-to-device copy from pageable memory, then cudaStreamSynchronize in `layer_N` (32 layers),
          32 per step: 128 stalls, the host blocked 260 ms in all (2.03 ms each)
    """
    st = stalls(view)
    if st is None:
        return
    affected = affected_devices(view.acct, _impact(st))
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    window = view.acct.window()
    held = bool(window) and st.host_blocked_ns >= LAYER_SYNC_HOLD_SHARE * window
    if severity is None and not held:
        return
    evidence = [*device_lines(affected, "idle around the stalls")]
    for g in st.groups[:LAYER_SYNC_MAX_GROUPS]:
        evidence.append(f"{group_text(g, st.per_step)}; GPU meanwhile busy {dur(g.busy_ns)}, idle "
                        f"{dur(g.idle_during_ns)} with nothing queued; idle after they returned until the host "
                        f"queued more work: {dur(g.idle_after_ns)}")
    if st.per_step is not None:
        evidence.append(per_step_line(st.per_step))
    title = f"{st.count:,} per-layer sync stalls: a copy to the GPU, then a synchronize"
    recommendation = (
        "Build the small tensor on the GPU, or copy it once before the layer loop from pinned memory with "
        "`non_blocking=True`; drop the synchronize after it (a copy on the stream is ordered before the "
        "kernels that read it), so the host queues the next layer while the GPU runs this one.",
        *advice("sync", view.workload),
    )
    if severity is None:
        yield rule.note(confidence=Confidence.MEDIUM, evidence=evidence, recommendation=recommendation,
                        title=f"{title} hold the host {dur(st.host_blocked_ns)}")
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=recommendation,
        title=f"{title} ({share:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=(ns, share),
        cause=Cause.SYNC,
    )


NLE217 = Rule(
    id="NLE217",
    name="layer-sync-stall",
    title="A copy to the GPU and a synchronize in every layer",
    check=layer_sync_stall,
    metric_ids=("host_patterns",),
)


SYNC_COPY_MIN_COUNT = 10


def sync_copy_on_launch_thread(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Synchronous copies stall the GPU: copy calls that block the host (synchronous
    cudaMemcpy*, or async copies to or from pageable memory), other than scalar read-backs.

    While such a call waits, nothing new is queued and the device drains. From host_patterns
    (sync_copies). Impact per device: the transfer idle time the copies cover plus the
    sync_wait idle time while the calls, and the launch right after them, were in flight (the
    stall). One cause, one finding: that time is not counted again by NLE208 (copies) or
    NLE103 (blocking calls). Fires from 10 copies. Severity from the impact bands
    (rules/impact.py).

    Example:

        NLE305 medium: 279 synchronous copies stall the GPU (5.9% of GPU 0's time)
        - GPU 0: 20.150 ms idle around synchronous copies (5.9% of its window); copies 9.391 ms, ...
        - cudaMemcpy x279 (214.6 MiB), 239 from a kernel-launching thread
    """
    hp = view.result(HostPatterns)
    sc = hp.sync_copies if hp is not None else None
    if sc is None or sc.count < SYNC_COPY_MIN_COUNT:
        return
    detail = {d.device_id: f"copies {ms(d.transfer_ns)}, waiting in the calls {ms(d.stall_ns)}" for d in sc.devices}
    affected = affected_devices(view.acct, {d.device_id: d.idle_ns for d in sc.devices}, detail)
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    if severity is None:
        return
    apis = ", ".join(f"{a.api} x{a.calls:,}" for a in sc.apis)
    evidence = [
        *device_lines(affected, "idle around synchronous copies"),
        f"{apis} ({size(sc.bytes)}), {sc.on_launch_threads:,} from a kernel-launching thread",
    ]
    severity, confidence, evidence = hidden_graphs_cap(view, severity, Confidence.HIGH, evidence)
    yield rule.finding(
        severity=severity,
        confidence=confidence,
        evidence=evidence,
        recommendation=advice("sync_copy", view.workload),
        title=f"{sc.count:,} synchronous copies stall the GPU ({share:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=(ns, share),
        cause=Cause.TRANSFER,
    )


NLE305 = Rule(
    id="NLE305",
    name="sync-copy-on-launch-thread",
    title="Synchronous copies stall the GPU",
    check=sync_copy_on_launch_thread,
    metric_ids=("host_patterns",),
)


RULES = (NLE103, NLE209, NLE210, NLE214, NLE215, NLE217, NLE305)
