"""Host synchronization: GPU idle behind blocking synchronization (NLE103), read-backs (NLE214),
one synchronize per launch (NLE215), a copy and a synchronize in every layer (NLE217),
synchronous copies on the launching thread (NLE305).

Which of these host-blocking sources have a finding of their own, and the sync_wait time they
explain together, so NLE103 (blocking synchronization) and NLE208 (copies) count only what the
reported findings leave. The sources (host_patterns): scalar read-backs (NLE214), per-layer
sync stalls (NLE217), one synchronize per launch (NLE215) and synchronous copies (NLE305). A
source counts as reported when its rule is selected (--select/--ignore) and its check yields a
finding. Their sync_wait time can overlap, so the time they explain is the union, read from
host_patterns' sync_wait_pieces (each piece of a device's sync_wait time with the sources that
cover it); a hand-built result without pieces falls back to the sum of the sources' own
figures."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.diagnosis.verdict import readback_text
from nsys_llm_explainer.fmt import size
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, ms
from nsys_llm_explainer.rules.impact import (
    affected_devices,
    band,
    cause_finding,
    device_lines,
    hidden_graphs_cap,
    total_pct,
    where,
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
    hp = view.metric("host_patterns")
    if hp is None or not sources:
        return {}
    out: dict[int, int] = {}
    pieces = hp.data.get("sync_wait_pieces")
    if pieces is None:  # built by hand: the sources' own figures, summed
        for source in sources:
            src = hp.data.get(source)
            for d in (src or {}).get("devices", []):
                ns = d.get("stall_ns", d.get("idle_ns", 0))
                out[d["device_id"]] = out.get(d["device_id"], 0) + int(ns)
        return out
    for p in pieces:
        if sources & set(p["sources"]):
            out[p["device_id"]] = out.get(p["device_id"], 0) + int(p["idle_ns"])
    return out


def remaining_by_api(view: RuleInput, sources: set[str], devices: set[int]) -> list[tuple[str, int]]:
    """(API, sync_wait ns inside its blocking calls and their refill) that none of `sources`
    covers on `devices`, largest first; [] without pieces."""
    hp = view.metric("host_patterns")
    pieces = hp.data.get("sync_wait_pieces") if hp is not None else None
    out: dict[str, int] = {}
    for p in pieces or []:
        if p["device_id"] in devices and not sources & set(p["sources"]) and p["api"]:
            out[p["api"]] = out.get(p["api"], 0) + int(p["idle_ns"])
    return sorted(((a, ns) for a, ns in out.items() if ns > 0), key=lambda t: (-t[1], t[0]))


MAX_APIS = 3


def blocking_sync(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU idles while the host is blocked in synchronizing calls.

    Impact: per device, the idle time idle_causes labels sync_wait (a blocking synchronize or
    a host-blocking copy call of a process that drives the device is in flight, or its refill
    launch right after), minus what the reported specific findings explain: scalar read-backs
    (NLE214), one synchronize per launch (NLE215) and synchronous copies (NLE305), taken as
    their union (rules/sync.py), never their sum. The host's own wait while the GPU
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


def _readback_impact(rb: dict[str, Any]) -> dict[int, int]:
    """Per device: sync_wait idle while read-backs were in flight, plus the host-late idle
    after they returned having drained the queue."""
    return {d["device_id"]: int(d["idle_ns"]) + int(d.get("after_ns", 0)) for d in rb.get("devices", [])}


def readbacks_reported(view: RuleInput) -> bool:
    """Whether this rule yields a finding (other rules then leave its time to it)."""
    hp = view.metric("host_patterns")
    rb = hp.data.get("scalar_readbacks") if hp is not None else None
    if not rb or rb["count"] < READBACK_MIN_COUNT:
        return False
    _, share = total_pct(view.acct, affected_devices(view.acct, _readback_impact(rb)))
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
    hp = view.metric("host_patterns")
    rb = hp.data.get("scalar_readbacks") if hp is not None else None
    if not rb or rb["count"] < READBACK_MIN_COUNT:
        return
    affected = affected_devices(view.acct, _readback_impact(rb))
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    held = _readbacks_holding(view, rb)
    if severity is None and held is None:
        return
    evidence = [*device_lines(affected, "idle around read-backs")]
    if held is not None:
        evidence.insert(0, held)
    for g in (rb.get("groups") or [])[:READBACK_MAX_GROUPS]:
        queued = f", idle {dur(g['queued_during_ns'])} with work queued waiting on something else" \
            if g["queued_during_ns"] else ""
        evidence.append(
            f"{readback_text(g, rb.get('per_step'))}: {g['count']:,} read-backs, the host blocked "
            f"{dur(g['host_blocked_ns'])} in all (GPU meanwhile busy {dur(g['busy_ns'])}, idle "
            f"{dur(g['idle_during_ns'])} with nothing queued{queued}); idle after they returned until the host "
            f"queued more work: {dur(g['idle_after_ns'])}")
    per = rb.get("per_step")
    if per:
        evidence.append(f"per step: {per['median']:g} at the median, {per['max']:,} at most; "
                        f"{per['with_readbacks']:,} of {per['steps']:,} steps have one")
    if not rb.get("groups") and rb["ranges"]:
        evidence.append("around: " + ", ".join(f"{r['range']!r} x{r['count']:,}" for r in rb["ranges"][:3]))
    if severity is None:  # they hold the host, but the GPU idle they provably cause is small
        yield rule.note(
            confidence=Confidence.MEDIUM,
            evidence=evidence,
            recommendation=advice("sync", view.workload),
            title=f"{rb['count']:,} read-backs hold the host while the GPU waits on other work",
        )
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("sync", view.workload),
        title=f"{rb['count']:,} read-backs stall the GPU ({share:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=(ns, share),
        cause=Cause.SYNC,
    )


def _readbacks_holding(view: RuleInput, rb: dict[str, Any]) -> str | None:
    """A line when read-backs block the host for at least HOLD_SHARE of the devices' windows
    while the GPU sits idle with queued work (what they wait for waits on something else), else
    None."""
    window = view.acct.window()
    queued = int(rb.get("queued_during_ns", 0))
    hold = READBACK_HOLD_SHARE * window
    if not window or rb.get("host_blocked_ns", 0) < hold or queued < hold:
        return None
    blocked = int(rb["host_blocked_ns"])
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
    hp = view.metric("host_patterns")
    if hp is None or not hp.data["sync_per_launch"]["found"]:
        return
    spl = hp.data["sync_per_launch"]
    affected = affected_devices(view.acct, {d["device_id"]: d["idle_ns"] for d in spl["devices"]})
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    if severity is None:
        return
    evidence = [
        *device_lines(affected, "idle around the per-launch syncs"),
        ", ".join(f"{a['api']} x{a['calls']:,}" for a in spl["apis"]) + f" on {spl['threads']} thread(s)",
    ]
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=advice("sync", view.workload),
        title=(f"One synchronize per launch: {spl['syncs']:,} syncs for {spl['launches']:,} launches "
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


def _layer_sync_impact(st: dict[str, Any]) -> dict[int, int]:
    """Per device: idle with nothing queued while the stalls held the host, plus the host-late
    idle after they returned."""
    return {d["device_id"]: int(d["idle_ns"]) + int(d.get("after_ns", 0)) for d in st.get("devices", [])}


def stalls(view: RuleInput) -> dict[str, Any] | None:
    hp = view.metric("host_patterns")
    st = hp.data.get("layer_syncs") if hp is not None else None
    return st if st and st["count"] >= LAYER_SYNC_MIN_COUNT else None


def layer_syncs_reported(view: RuleInput) -> bool:
    """Whether this rule yields a finding with time at stake (other rules then leave its time
    to it)."""
    st = stalls(view)
    if st is None:
        return False
    _, share = total_pct(view.acct, affected_devices(view.acct, _layer_sync_impact(st)))
    return band(share) is not None


def group_text(g: dict[str, Any], per_step: dict[str, Any] | None) -> str:
    """'a 8 B host-to-device copy from pageable memory, then cudaStreamSynchronize, in `layer_N`
    (32 layers), 32 per step: 128 stalls, the host blocked 260 ms in all (2.03 ms each)'."""
    unit = f" in `{g['unit']}`" + (f" ({g['layers']:,} layers)" if g["layers"] > 1 else "") if g["unit"] else ""
    steps = (per_step or {}).get("steps")
    each = f", {g['count'] // steps:,} per step" if steps and g["count"] % steps == 0 else ""
    return (f"a {g['bytes']:,} B host-to-device copy from pageable memory, then {g['sync_api']}{unit}{each}: "
            f"{g['count']:,} stalls, the host blocked {dur(g['host_blocked_ns'])} in all "
            f"({dur(g['host_blocked_ns'] // max(1, g['count']))} each)")


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
    affected = affected_devices(view.acct, _layer_sync_impact(st))
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    window = view.acct.window()
    held = bool(window) and st["host_blocked_ns"] >= LAYER_SYNC_HOLD_SHARE * window
    if severity is None and not held:
        return
    evidence = [*device_lines(affected, "idle around the stalls")]
    for g in st["groups"][:LAYER_SYNC_MAX_GROUPS]:
        evidence.append(f"{group_text(g, st.get('per_step'))}; GPU meanwhile busy {dur(g['busy_ns'])}, idle "
                        f"{dur(g['idle_during_ns'])} with nothing queued; idle after they returned until the host "
                        f"queued more work: {dur(g['idle_after_ns'])}")
    per = st.get("per_step")
    if per:
        evidence.append(f"per step: {per['median']:g} at the median, {per['max']:,} at most; "
                        f"{per['with_readbacks']:,} of {per['steps']:,} steps have one")
    title = f"{st['count']:,} per-layer sync stalls: a copy to the GPU, then a synchronize"
    recommendation = (
        "Build the small tensor on the GPU, or copy it once before the layer loop from pinned memory with "
        "`non_blocking=True`; drop the synchronize after it (a copy on the stream is ordered before the "
        "kernels that read it), so the host queues the next layer while the GPU runs this one.",
        *advice("sync", view.workload),
    )
    if severity is None:
        yield rule.note(confidence=Confidence.MEDIUM, evidence=evidence, recommendation=recommendation,
                        title=f"{title} hold the host {dur(st['host_blocked_ns'])}")
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
    hp = view.metric("host_patterns")
    sc = hp.data.get("sync_copies") if hp is not None else None
    if not sc or sc["count"] < SYNC_COPY_MIN_COUNT:
        return
    detail = {d["device_id"]: f"copies {ms(d['transfer_ns'])}, waiting in the calls {ms(d['stall_ns'])}"
              for d in sc["devices"]}
    affected = affected_devices(view.acct, {d["device_id"]: d["idle_ns"] for d in sc["devices"]}, detail)
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    if severity is None:
        return
    apis = ", ".join(f"{a['api']} x{a['calls']:,}" for a in sc["apis"])
    evidence = [
        *device_lines(affected, "idle around synchronous copies"),
        f"{apis} ({size(sc['bytes'])}), {sc['on_launch_threads']:,} from a kernel-launching thread",
    ]
    severity, confidence, evidence = hidden_graphs_cap(view, severity, Confidence.HIGH, evidence)
    yield rule.finding(
        severity=severity,
        confidence=confidence,
        evidence=evidence,
        recommendation=advice("sync_copy", view.workload),
        title=f"{sc['count']:,} synchronous copies stall the GPU ({share:.1f}% of {where(affected)} time)",
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


RULES = (NLE103, NLE214, NLE215, NLE217, NLE305)
