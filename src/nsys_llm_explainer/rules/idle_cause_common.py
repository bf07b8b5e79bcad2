"""Shared shape of the cause findings (NLE103, NLE208-NLE211, NLE307): one finding per cause
over every affected device, its impact the cause's time in diagnosis/accounting.py.

When many CUDA graph launches have no execution record (diagnosis/verdict.py
graphs_hide_work), graph work may fill what looks idle: a cause finding then stays at low
severity and low confidence and says so."""

from __future__ import annotations

from collections.abc import Sequence

from nsys_llm_explainer.diagnosis.verdict import graphs_hide_work
from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT
from nsys_llm_explainer.model import Affected, Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, us
from nsys_llm_explainer.rules.impact import affected_devices, band, buckets_by_device, total_pct

MAX_DEVICE_LINES = 8


def device_lines(affected: Sequence[Affected], what: str) -> list[str]:
    lines = [
        f"GPU {a.device_id}: {dur(a.impact_ns)} {what} ({a.impact_pct:.1f}% of its window)"
        + (f"; {a.detail}" if a.detail else "")
        for a in affected[:MAX_DEVICE_LINES]
    ]
    if len(affected) > MAX_DEVICE_LINES:
        lines.append(f"... and {len(affected) - MAX_DEVICE_LINES} more devices")
    return lines


def host_bound_phases(view: RuleInput) -> list[str]:
    """Evidence: the phases the boundness metric calls host-bound (GPU waits on launches)."""
    res = view.metric("boundness")
    if res is None:
        return []
    return [
        f"phase {p['phase']}: host-bound (GPU busy {p['gpu_busy_pct']:.1f}% of its ranges, kernels start "
        f"{us(p['queue_p50_ns'])} after their launch at the median, {p['launch_calls']:,} launches)"
        for p in res.data["phases"] if p["verdict"] == "host_bound"
    ]


def devices_phrase(affected: Sequence[Affected]) -> str:
    """'GPU 3' or '8 GPUs'."""
    devs = sorted(a.device_id for a in affected if a.device_id is not None)
    return f"GPU {devs[0]}" if len(devs) == 1 else f"{len(devs)} GPUs"


def where(affected: Sequence[Affected]) -> str:
    """The possessive of devices_phrase: "GPU 3's", "8 GPUs'"."""
    phrase = devices_phrase(affected)
    return phrase + ("'" if phrase.endswith("s") else "'s")


def startup_part(view: RuleInput, affected: Sequence[Affected], buckets: tuple[str, ...]) -> int | None:
    """GPU ns of the affected devices' `buckets` time that lies in start-up (before the steady
    part the capture metric found; all of it when no steady part follows), or None when the
    capture is steady state or too little data rather than start-up."""
    cap = view.metric("capture")
    if cap is None or cap.data["steady_state"] or cap.data["startup_pct_of_window"] < NOT_STEADY_PCT:
        return None
    ns = 0
    for a in affected:
        d = view.acct.device(a.device_id) if a.device_id is not None else None
        if d is None:
            continue
        steady = sum(d.steady.get(b, 0) for b in buckets) if d.steady is not None else 0
        ns += max(0, a.impact_ns - steady)
    return ns


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
    buckets: tuple[str, ...],
    cause: str,
    title: str,
    what: str,
    evidence: Sequence[str],
    recommendations: Sequence[str],
    confidence: Confidence = Confidence.HIGH,
    subtract: dict[int, int] | None = None,
    startup: bool = False,
) -> Finding | None:
    """The finding for `buckets`' time on every device, or None below the low band.

    `title` may use {pct} (share of the affected windows) and {where}; `subtract`: per-device
    ns already reported by a more specific finding (not counted twice). `startup`: on a capture
    that is not steady state, say how much of the time lies in start-up (startup_part), in
    the title when that is most of it, so start-up is not restated as this cause."""
    per_device = buckets_by_device(view.acct, buckets)
    for dev, ns in (subtract or {}).items():
        if dev in per_device:
            per_device[dev] = max(0, per_device[dev] - ns)
    affected = affected_devices(view.acct, per_device)
    ns, pct = total_pct(view.acct, affected)
    severity = band(pct)
    if severity is None:
        return None
    text = title.format(pct=f"{pct:.1f}%", where=where(affected))
    lines = [*device_lines(affected, what), *evidence]
    early = startup_part(view, affected, buckets) if startup else None
    if early:
        share = 100.0 * early / ns if ns else 0.0
        steady_follows = any((d := view.acct.device(a.device_id)) is not None and d.steady is not None
                             for a in affected if a.device_id is not None)
        if steady_follows:
            lines.insert(0, f"{dur(early)} of it ({share:.1f}%) lies before the steady part begins (after the "
                            "last start-up event; the capture section says what ran there): start-up time, not a "
                            "steady cost")
            if 2 * early >= ns:
                text += f", {share:.0f}% of it before the steady part"
        else:
            lines.insert(0, "no steady part follows the start-up events in this capture, so this time belongs to "
                            "start-up (the capture section says what ran there), not to a steady cost")
            text += ", in a capture with no steady part"
    severity, confidence, lines = hidden_graphs_cap(view, severity, confidence, lines)
    return rule.finding(
        severity, confidence, lines, recommendations, title=text,
        affected=affected, impact=(ns, pct), cause=cause,
    )
