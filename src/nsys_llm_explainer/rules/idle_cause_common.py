"""Shared shape of the cause findings (NLE103, NLE208-NLE210, NLE307): one finding per cause
over every affected device, its impact the cause's time in diagnosis/accounting.py; on a
start-up capture, its time in the steady part only (start-up is NLE216's).

When many CUDA graph launches have no execution record (diagnosis/verdict.py
graphs_hide_work), graph work may fill what looks idle: a cause finding then stays at low
severity and low confidence and says so."""

from __future__ import annotations

from collections.abc import Sequence

from nsys_llm_explainer.diagnosis.verdict import graphs_hide_work
from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT
from nsys_llm_explainer.model import Affected, Bucket, Cause, Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, us
from nsys_llm_explainer.rules.impact import affected_devices, band, buckets_by_device, total_pct

MAX_DEVICE_LINES = 8


def host_recommendations(view: RuleInput, default_topic: str) -> tuple[str, ...]:
    """Advice for host-caused idle time: the advice of the family that holds most of it
    (diagnosis/host_work.py lead_family), then `default_topic`'s; the capture hint when
    nothing names the host's work."""
    from nsys_llm_explainer.diagnosis import host_work
    from nsys_llm_explainer.rules.advice import HOST_FAMILY_TOPIC, advice

    ic = view.metric("idle_causes")
    devices = [d.device_id for d in view.acct.devices]
    hs = host_work.combined(ic.data if ic is not None else None, devices)
    family = host_work.lead_family(hs)
    out = list(advice(HOST_FAMILY_TOPIC[family], view.workload)) if family in HOST_FAMILY_TOPIC else []
    for line in advice(default_topic, view.workload):
        if line not in out:
            out.append(line)
    return tuple(out)


def host_evidence(view: RuleInput) -> list[str]:
    """What the launching thread did in the host-caused idle time (diagnosis/host_work.py)."""
    from nsys_llm_explainer.diagnosis import host_work

    ic = view.metric("idle_causes")
    devices = [d.device_id for d in view.acct.devices]
    return host_work.evidence(host_work.combined(ic.data if ic is not None else None, devices),
                              view.metric("operators") is not None)


def readback_after(view: RuleInput, bucket: Bucket) -> dict[int, int]:
    """Per device: the `bucket` idle time (launch_bound or host_other) the read-back finding
    (NLE214) and the per-layer sync stall finding (NLE217) already count, after calls that
    drained the queue (not counted twice)."""
    from nsys_llm_explainer.rules import nle214_scalar_readbacks, nle217_layer_sync_stall
    from nsys_llm_explainer.rules.sync_sources import selected

    hp = view.metric("host_patterns")
    out: dict[int, int] = {}
    for key, rule_id, reports in (("scalar_readbacks", "NLE214", nle214_scalar_readbacks.reports),
                                  ("layer_syncs", "NLE217", nle217_layer_sync_stall.reports)):
        src = (hp.data.get(key) or {}) if hp is not None else {}
        if not src.get("count") or not selected(view, rule_id) or not reports(view):
            continue
        for d in src.get("devices", []):
            out[d["device_id"]] = out.get(d["device_id"], 0) + int(d.get("after_by_cause", {}).get(bucket, 0))
    return out


def device_lines(affected: Sequence[Affected], what: str) -> list[str]:
    lines = [
        f"GPU {a.device_id}: {dur(a.impact_ns)} {what} ({a.impact_pct:.1f}% of its window)"
        + (f"; {a.detail}" if a.detail else "")
        for a in affected[:MAX_DEVICE_LINES]
    ]
    if len(affected) > MAX_DEVICE_LINES:
        lines.append(f"... and {len(affected) - MAX_DEVICE_LINES} more devices")
    return lines


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


def devices_phrase(affected: Sequence[Affected]) -> str:
    """'GPU 3' or '8 GPUs'."""
    devs = sorted(a.device_id for a in affected if a.device_id is not None)
    return f"GPU {devs[0]}" if len(devs) == 1 else f"{len(devs)} GPUs"


def where(affected: Sequence[Affected]) -> str:
    """The possessive of devices_phrase: "GPU 3's", "8 GPUs'"."""
    phrase = devices_phrase(affected)
    return phrase + ("'" if phrase.endswith("s") else "'s")


def startup_capture(view: RuleInput) -> bool:
    """The capture is start-up, not steady state (the verdict not_steady_state): its idle time
    before the steady part begins is NLE216's, one finding for all of start-up."""
    cap = view.metric("capture")
    return cap is not None and cap.data["startup_pct_of_window"] >= NOT_STEADY_PCT


def steady_only(view: RuleInput, per_device: dict[int, int], buckets: tuple[Bucket, ...]) -> tuple[dict[int, int], int]:
    """(`per_device` cut to the steady part, the ns cut off): each device keeps at most its
    `buckets` time from the steady start on (none when no steady part follows)."""
    out, cut = {}, 0
    for dev, ns in per_device.items():
        d = view.acct.device(dev)
        steady = sum(d.steady.get(b, 0) for b in buckets) if d is not None and d.steady is not None else 0
        out[dev] = min(ns, steady)
        cut += ns - out[dev]
    return out, cut


def hidden_graphs_cap(
    view: RuleInput, severity: Severity, confidence: Confidence, evidence: list[str]
) -> tuple[Severity, Confidence, list[str]]:
    """Low severity and confidence, and a line saying why, when graph work may fill the idle
    time (see the module docstring); else unchanged."""
    hidden = graphs_hide_work(view.metrics)
    if hidden is None:
        return severity, confidence, evidence
    capped = Severity.LOW if severity.rank < Severity.LOW.rank else severity
    return capped, Confidence.LOW, [*evidence, f"not reliable: {hidden}"]


def cause_finding(
    view: RuleInput,
    rule: Rule,
    *,
    buckets: tuple[Bucket, ...],
    cause: Cause,
    title: str,
    what: str,
    evidence: Sequence[str],
    recommendations: Sequence[str],
    confidence: Confidence = Confidence.HIGH,
    subtract: dict[int, int] | None = None,
) -> Finding | None:
    """The finding for `buckets`' time on every device, or None below the low band.

    `title` may use {pct} (share of the affected windows) and {where}; `subtract`: per-device
    ns already reported by a more specific finding (not counted twice). On a start-up capture
    (startup_capture) only the steady part counts: the time before it is start-up's finding
    (NLE216), so start-up is not restated as this cause."""
    per_device = buckets_by_device(view.acct, buckets)
    for dev, ns in (subtract or {}).items():
        if dev in per_device:
            per_device[dev] = max(0, per_device[dev] - ns)
    cut = 0
    if startup_capture(view):
        per_device, cut = steady_only(view, per_device, buckets)
    affected = affected_devices(view.acct, per_device)
    ns, pct = total_pct(view.acct, affected)
    severity = band(pct)
    if severity is None:
        return None
    text = title.format(pct=f"{pct:.1f}%", where=where(affected))
    lines = [*device_lines(affected, what), *evidence]
    if cut:
        lines.insert(0, f"the steady part only: {dur(cut)} of this cause before the steady part begins is "
                        "start-up's (NLE216)")
    severity, confidence, lines = hidden_graphs_cap(view, severity, confidence, lines)
    return rule.finding(
        severity=severity,
        confidence=confidence,
        evidence=lines,
        recommendation=recommendations,
        title=text,
        affected=affected,
        impact=(ns, pct),
        cause=cause,
    )
