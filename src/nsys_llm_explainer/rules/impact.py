"""Severity from the GPU time at stake, the same bands for every rule.

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
MIN_STEADY_PCT of the window and MIN_STEADY_NS). Other findings are capped at low there.
"""

from __future__ import annotations

from collections.abc import Iterable

from nsys_llm_explainer.diagnosis.accounting import Accounting
from nsys_llm_explainer.model import Affected, Bucket, Severity, round_pct

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
