from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Bucket, Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms
from nsys_llm_explainer.rules.impact import buckets_by_device

MIN_PCT = 5.0  # of all device time


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Much GPU idle time lies where the host is not visible in the capture (a note).

    capture_edge time (idle_causes: outside the first-to-last CUDA call window of the
    processes driving the device, or activity-window time no copy covers) is not at stake:
    the capture cannot say why the GPU idled there. Reported as a note (info) when it is at
    least 5% of all device time, so a reader knows the split leaves it out.

    Example:

        NLE211 info: 12.0% of the GPU time lies where the host is not visible
        - 120.000 ms on 2 GPUs outside the host's captured activity
    """
    per_device = buckets_by_device(view.acct, (Bucket.CAPTURE_EDGE,))
    ns = sum(per_device.values())
    window = view.acct.window()
    if window <= 0 or 100.0 * ns / window < MIN_PCT:
        return
    share = 100.0 * ns / window
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{ms(ns)} on {sum(1 for v in per_device.values() if v)} GPU(s) outside the host's captured activity"
        ],
        recommendation=[
            "Start the capture before and end it after the work you study, so the host calls that "
            "feed the GPU are inside the window."
        ],
        title=f"{share:.1f}% of the GPU time lies where the host is not visible",
    )


RULE = Rule(
    id="NLE211",
    name="idle-capture-edge",
    title="GPU idle at the capture edges",
    check=check,
    metric_ids=("idle_causes",),
)
