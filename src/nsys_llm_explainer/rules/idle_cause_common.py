"""Shared shape of the cause findings (NLE103, NLE208-NLE211, NLE307): one finding per cause
over every affected device, its impact the cause's time in diagnosis/accounting.py."""

from __future__ import annotations

from collections.abc import Sequence

from nsys_llm_explainer.model import Affected, Confidence, Finding
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
) -> Finding | None:
    """The finding for `buckets`' time on every device, or None below the low band.

    `title` may use {pct} (share of the affected windows) and {where}; `subtract`: per-device
    ns already reported by a more specific finding (not counted twice)."""
    per_device = buckets_by_device(view.acct, buckets)
    for dev, ns in (subtract or {}).items():
        if dev in per_device:
            per_device[dev] = max(0, per_device[dev] - ns)
    affected = affected_devices(view.acct, per_device)
    ns, pct = total_pct(view.acct, affected)
    severity = band(pct)
    if severity is None:
        return None
    return rule.finding(
        severity, confidence, [*device_lines(affected, what), *evidence], recommendations,
        title=title.format(pct=f"{pct:.1f}%", where=where(affected)),
        affected=affected, impact=(ns, pct), cause=cause,
    )
