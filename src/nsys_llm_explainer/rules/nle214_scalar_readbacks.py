from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import device_lines, where
from nsys_llm_explainer.rules.impact import affected_devices, band, total_pct

MIN_COUNT = 3


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Scalar read-backs: tiny copies (at most 1 KiB) whose call blocks the host, or that a
    blocking synchronize follows on the same thread, as `.item()`, `.cpu()`, `.tolist()` or a
    Python `if` on a tensor produce.

    Impact: the sync_wait idle time on the copy's device while the copy call and its sync were
    in flight, plus the refill launch after them (host_patterns); the host's wait while the GPU
    was busy costs nothing. At least 3 read-backs. Evidence names the innermost NVTX range or
    operator around them. Severity from the impact bands (rules/impact.py).

    Example:

        NLE214 medium: 4,096 scalar read-backs stall the GPU (7.2% of GPU 0's time)
        - GPU 0: 72.000 ms idle around read-backs (7.2% of its window)
        - 4,096 read-backs (4,096 device-to-host), 4,096 followed by a synchronize
        - around: 'aten::_local_scalar_dense' x4,096
    """
    hp = view.metric("host_patterns")
    rb = hp.data.get("scalar_readbacks") if hp is not None else None
    if not rb or rb["count"] < MIN_COUNT:
        return
    affected = affected_devices(view.acct, {d["device_id"]: d["idle_ns"] for d in rb["devices"]})
    ns, share = total_pct(view.acct, affected)
    severity = band(share)
    if severity is None:
        return
    evidence = [
        *device_lines(affected, "idle around read-backs"),
        f"{rb['count']:,} read-backs ({rb['d2h']:,} device-to-host, {rb['h2d']:,} host-to-device), "
        f"{rb['followed_by_sync']:,} followed by a synchronize",
    ]
    if rb["ranges"]:
        evidence.append("around: " + ", ".join(f"{r['range']!r} x{r['count']:,}" for r in rb["ranges"][:3]))
    yield rule.finding(
        severity, Confidence.HIGH, evidence, advice("sync", view.workload),
        title=f"{rb['count']:,} scalar read-backs stall the GPU ({share:.1f}% of {where(affected)} time)",
        affected=affected, impact=(ns, share), cause="sync",
    )


RULE = Rule("NLE214", "scalar-readbacks", "Scalar read-backs stall the GPU", check, ("host_patterns",))
