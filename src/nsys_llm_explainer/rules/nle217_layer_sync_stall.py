from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.model import Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur
from nsys_llm_explainer.rules.idle_cause_common import device_lines, where
from nsys_llm_explainer.rules.impact import affected_devices, band, total_pct

MIN_COUNT = 3
MAX_GROUPS = 3
HOLD_SHARE = 0.1


def _impact(st: dict[str, Any]) -> dict[int, int]:
    """Per device: idle with nothing queued while the stalls held the host, plus the host-late
    idle after they returned."""
    return {d["device_id"]: int(d["idle_ns"]) + int(d.get("after_ns", 0)) for d in st.get("devices", [])}


def stalls(view: RuleInput) -> dict[str, Any] | None:
    hp = view.metric("host_patterns")
    st = hp.data.get("layer_syncs") if hp is not None else None
    return st if st and st["count"] >= MIN_COUNT else None


def reports(view: RuleInput) -> bool:
    """Whether this rule yields a finding with time at stake (other rules then leave its time
    to it)."""
    st = stalls(view)
    if st is None:
        return False
    _, share = total_pct(view.acct, affected_devices(view.acct, _impact(st)))
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


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    held = bool(window) and st["host_blocked_ns"] >= HOLD_SHARE * window
    if severity is None and not held:
        return
    evidence = [*device_lines(affected, "idle around the stalls")]
    for g in st["groups"][:MAX_GROUPS]:
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


RULE = Rule(
    id="NLE217",
    name="layer-sync-stall",
    title="A copy to the GPU and a synchronize in every layer",
    check=check,
    metric_ids=("host_patterns",),
)
