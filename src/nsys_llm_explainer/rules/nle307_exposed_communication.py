from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

MEDIUM_PCT = 10.0  # exposed communication as a share of the device's kernel window
HIGH_PCT = 25.0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Communication kernels run without compute on the same GPU for a large share of time.

    Per device: exposed = union of communication kernel intervals minus the part covered
    by other kernels on the same device. Fires at >= 10% (medium) or >= 25% (high) of the
    device's kernel window; one finding for the worst device.

    Example:

        NLE307 high: Exposed communication: 31.0% of GPU 1's time
        - device 1: 310.000 ms exposed of 400.000 ms communication (22.5% overlapped)
        - 12 devices at or above 10%
    """
    res = view.metric("communication")
    if res is None:
        return
    devs = [d for d in res.data["devices"] if (d["exposed_pct_of_window"] or 0) >= MEDIUM_PCT]
    if not devs:
        return
    worst = max(devs, key=lambda d: d["exposed_pct_of_window"])
    share = float(worst["exposed_pct_of_window"])
    yield rule.finding(
        Severity.HIGH if share >= HIGH_PCT else Severity.MEDIUM,
        Confidence.HIGH,
        [
            f"device {worst['device_id']}: {ms(worst['exposed_ns'])} exposed of "
            f"{ms(worst['comm_union_ns'])} "
            f"communication ({pct(worst['overlap_pct'] or 0)} overlapped)",
            f"{len(devs)} device(s) at or above {pct(MEDIUM_PCT)}",
        ],
        [
            "Overlap collectives with compute (separate communication stream, async all-reduce, "
            "chunked/pipelined tensor-parallel GEMMs) or reduce their volume (fewer, "
            "larger collectives; "
            "custom all-reduce for small messages)."
        ],
        title=f"Exposed communication: {pct(share)} of GPU {worst['device_id']}'s time",
    )


RULE = Rule(
    "NLE307",
    "exposed-communication",
    "Communication not overlapped by compute",
    check,
    ("communication",),
)
