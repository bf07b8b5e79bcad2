from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.accounting import BUSY
from nsys_llm_explainer.diagnosis.evidence import transfer_lines
from nsys_llm_explainer.metrics import idle_causes
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import cause_finding
from nsys_llm_explainer.rules.sync_sources import reported

TOPIC = {"peer": "transfer_peer", "device_to_host": "transfer_d2h"}


def _direction(view: RuleInput) -> str:
    """The transfer direction whose copies cover the most idle time ('host_to_device' when
    unknown)."""
    res = view.metric("idle_causes")
    by: dict[str, int] = {}
    for d in idle_causes.devices(res.data if res is not None else {}):
        for t in d.get("transfers", []):
            by[t["direction"]] = by.get(t["direction"], 0) + int(t["idle_ns"])
    return max(sorted(by), key=lambda k: by[k]) if by and max(by.values()) > 0 else "host_to_device"


# Per topic: the advice line that moves fewer bytes, which leads when overlap cannot hide the copies.
MOVE_LESS = {"transfer": ("resident", "Move less data"), "transfer_d2h": ("Reduce on the GPU", "Copy back less")}


def lead_with_fewer_bytes(view: RuleInput, topic: str, lines: tuple[str, ...]) -> tuple[str, ...]:
    """The advice, main fix first: overlapping copies with compute hides at most the GPU's own
    work time, so where the transfer idle time exceeds the GPU's own work (busy time), the line
    that moves fewer bytes leads, saying why; otherwise overlap leads."""
    transfer, busy = view.acct.total(Cause.TRANSFER), view.acct.total(BUSY)
    words = MOVE_LESS.get(topic)
    if not words or transfer <= busy:
        return lines
    fewer = next((i for i, line in enumerate(lines) if any(w in line for w in words)), None)
    if fewer is None or fewer == 0:
        return lines
    ratio = f"{transfer / busy:,.0f}x" if busy else "far more than"
    why = (f"The copies outlast the GPU's own work ({ratio} its busy time), so overlapping them can hide at most "
           "that work's time: ")
    lead = why + lines[fewer][:1].lower() + lines[fewer][1:]
    return (lead, *lines[:fewer], *lines[fewer + 1:])


def coincident(view: RuleInput, devices: list[int]) -> bool:
    """Whether the copies only coincide with the idle time: idle gaps ended with work queued
    before them, and not one had a copy on that work's own stream just ahead of it (the
    dependency that would make the GPU wait on the copy). The idle time is then counted as the
    copies' by precedence alone, so the finding says so at low confidence."""
    res = view.metric("idle_causes")
    rows = [d for d in idle_causes.devices(res.data if res is not None else {}) if d["device_id"] in devices]
    queued = sum(int(d["queued_gaps"]) for d in rows)
    ahead = sum(int(d["copy_ahead_gaps"]) for d in rows)
    return queued > 0 and ahead == 0


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU waits on transfers: no work runs on the device while a host<->device or peer copy
    does (device-to-device copies and memsets are the device's own work, never idle time).

    Impact: per device, the idle time a transfer on that device covers (idle_causes: transfer
    comes first in the precedence), plus transfers before the first or after the last work,
    minus the copy time of synchronous copies when NLE305 reports them (one cause, one
    finding). Evidence names the copy kinds and their achieved bandwidth, how many idle gaps
    ended with work already queued behind a copy on its own stream (the dependency that made
    the GPU wait), and per GPU what the host's blocking calls overlapped: it says the host
    simply waited for the copies only when they overlapped copy time more than anything else.
    Advice follows the copy direction that covers the most idle time (host-to-device,
    device-to-host, peer); overlap leads, unless the transfer idle time exceeds the GPU's own
    work (overlap can hide at most that), when moving fewer bytes leads. Confidence is low when
    the copies only coincide with the idle time (queued work, none behind a copy on its own
    stream): coincident is not causal. Severity from the impact bands (rules/impact.py).

    Example:

        NLE208 high: GPU waits on copies (97.0% of 2 GPUs' time)
        - GPU 0: 940.505 ms idle while copies ran (97.0% of its window)
        - Host-to-Device: 450 copies, 47.5 GiB in 1.842 s of copy time (27.7 GB/s)
    """
    subtract = {}
    hp = view.metric("host_patterns")
    sc = hp.data.get("sync_copies") if hp is not None else None
    if sc and "sync_copies" in reported(view):
        subtract = {d["device_id"]: int(d["transfer_ns"]) for d in sc["devices"]}
    devices = [d.device_id for d in view.acct.devices]
    topic = TOPIC.get(_direction(view), "transfer")
    f = cause_finding(
        view,
        rule,
        buckets=(Bucket.TRANSFER,),
        cause=Cause.TRANSFER,
        title="GPU waits on copies ({pct} of {where} time)",
        what="idle while copies ran",
        evidence=transfer_lines(view.metrics, view.acct, devices),
        recommendations=lead_with_fewer_bytes(view, topic, advice(topic, view.workload)),
        confidence=Confidence.LOW if coincident(view, devices) else Confidence.HIGH,
        subtract=subtract,
    )
    if f is not None:
        yield f


RULE = Rule(
    id="NLE208",
    name="idle-transfer",
    title="GPU idle while copying",
    check=check,
    metric_ids=("idle_causes", "host_patterns"),
)
