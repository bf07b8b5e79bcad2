"""Severity from the GPU time at stake, the same bands for every rule, and the shape of the
findings that state it: the affected devices, one evidence line per device, and the cause
finding (cause_finding).

A finding's impact is a ceiling: the GPU time its affected devices would get back if its
cause disappeared (idle time it provably causes, or busy time spent on work that need not
run). With several affected devices it is the largest single device's time, never their sum
(the devices run side by side: a sum would exceed the window), and impact_pct is that time as
a share of that device's window (diagnosis/accounting.py: first to last activity per device);
each device's own figures are in `affected` and the evidence. Bands: HIGH_PCT and up is high,
MEDIUM_PCT medium, LOW_PCT low; below LOW_PCT a cause is not reported. Notes about the
capture or the data carry no impact and are INFO.

When the capture is not steady state, a finding keeps a severity above low only if it holds
in the steady part: its idle-time share recomputed from the steady start on (idle_causes'
steady split) still reaches the band, and that part is long enough to judge (rules/engine.py:
MIN_STEADY_PCT of the window and MIN_STEADY_NS). Other findings are capped at low there."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nsys_llm_explainer.diagnosis.accounting import Accounting
from nsys_llm_explainer.diagnosis.verdict import graphs_hide_work
from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT
from nsys_llm_explainer.model import Affected, Bucket, Cause, Confidence, Finding, Severity, round_pct
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur

HIGH_PCT = 25.0
MEDIUM_PCT = 5.0
LOW_PCT = 1.0


def band(pct: float) -> Severity | None:
    if pct >= HIGH_PCT:
        return Severity.HIGH
    if pct >= MEDIUM_PCT:
        return Severity.MEDIUM
    if pct >= LOW_PCT:
        return Severity.LOW
    return None


def affected_devices(
    acct: Accounting, per_device_ns: dict[int, int], detail: dict[int, str] | None = None
) -> tuple[Affected, ...]:
    """One Affected per device with a non-zero impact, largest first."""
    out = []
    for dev, ns in per_device_ns.items():
        d = acct.device(dev)
        if d is None or ns <= 0:
            continue
        out.append(Affected(dev, d.pids, int(ns), round_pct(d.pct(ns)), (detail or {}).get(dev, "")))
    return tuple(sorted(out, key=lambda a: (-a.impact_ns, a.device_id or 0)))


def total_pct(acct: Accounting, affected: Iterable[Affected]) -> tuple[int, float]:
    """(impact ns, its share of the device's window, unrounded: bands compare it) of a set of
    affected devices: the device with the most time at stake (ties: the larger share), never
    the devices' sum."""
    best: tuple[int, float] = (0, 0.0)
    for a in affected:
        d = acct.device(a.device_id) if a.device_id is not None else None
        share = 100.0 * a.impact_ns / d.window_ns if d is not None and d.window_ns else 0.0
        best = max(best, (int(a.impact_ns), share))
    return best


def buckets_by_device(acct: Accounting, buckets: tuple[Bucket, ...], steady: bool = False) -> dict[int, int]:
    out = {}
    for d in acct.devices:
        source = d.steady if steady and d.steady is not None else d.buckets
        out[d.device_id] = sum(source.get(b, 0) for b in buckets)
    return out


def whole(acct: Accounting, ns: int) -> tuple[tuple[Affected, ...], tuple[int, float]]:
    """For causes measured over the whole trace, not per device: one Affected for all devices,
    the share of all devices' windows."""
    window = acct.window()
    share = 100.0 * ns / window if window else 0.0
    pids = tuple(sorted({p for d in acct.devices for p in d.pids}))
    return (Affected(None, pids, int(ns), round_pct(share)),), (int(ns), share)


def per_device(acct: Accounting, ns_by_device: dict[int, int]) -> tuple[tuple[Affected, ...], tuple[int, float]]:
    affected = affected_devices(acct, ns_by_device)
    return affected, total_pct(acct, affected)


# Shared shape of the cause findings (NLE103, NLE208-NLE210, NLE307): one finding per cause
# over every affected device, its impact the cause's time in diagnosis/accounting.py; on a
# start-up capture, its time in the steady part only (start-up is NLE216's).
#
# When many CUDA graph launches have no execution record (diagnosis/verdict.py
# graphs_hide_work), graph work may fill what looks idle: a cause finding then stays at low
# severity and low confidence and says so.
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
    time (see the cause findings above); else unchanged."""
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
