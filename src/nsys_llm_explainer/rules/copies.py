"""Copies between host and device: GPU idle while copying (NLE208), async copies from pageable
memory (NLE304), many tiny transfers (NLE306), host-device copies far below PCIe bandwidth
(NLE311)."""

from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diagnosis.accounting import BUSY
from nsys_llm_explainer.diagnosis.evidence import transfer_lines
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.results.devices import GpuContext, IdleCauses, MemoryTransfers
from nsys_llm_explainer.results.host import HostPatterns
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.host import reported
from nsys_llm_explainer.rules.impact import band, cause_finding, per_device, whole

TOPIC = {"peer": "transfer_peer", "device_to_host": "transfer_d2h"}


def _direction(view: RuleInput) -> str:
    """The transfer direction whose copies cover the most idle time ('host_to_device' when
    unknown)."""
    ic = view.result(IdleCauses)
    by: dict[str, int] = {}
    for d in ic.devices if ic is not None else ():
        for t in d.transfers:
            by[t.direction] = by.get(t.direction, 0) + t.idle_ns
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
    ic = view.result(IdleCauses)
    rows = ic.of(devices) if ic is not None else []
    queued = sum(d.queued_gaps for d in rows)
    ahead = sum(d.copy_ahead_gaps for d in rows)
    return queued > 0 and ahead == 0


def idle_transfer(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    hp = view.result(HostPatterns)
    sc = hp.sync_copies if hp is not None else None
    if sc is not None and "sync_copies" in reported(view):
        subtract = {d.device_id: d.transfer_ns for d in sc.devices}
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


NLE208 = Rule(
    id="NLE208",
    name="idle-transfer",
    title="GPU idle while copying",
    check=idle_transfer,
    metric_ids=("idle_causes", "host_patterns"),
)


def pageable_async_copy(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Async copies touch pageable host memory, so they run synchronously.

    A cudaMemcpyAsync (or any *Async copy API) from or to pageable (not pinned) host memory
    is staged through a driver buffer and blocks the calling thread. Fires on any such copy
    (joined to its API call on pid and correlation id). Impact: those copies' time over all
    devices' windows; severity from the impact bands (rules/impact.py).

    Example:

        NLE304 low: 4 async copies use pageable host memory
        - 4 copies, 3.1 KiB, 0.003 ms (memory_transfer_issues.csv, issue pageable_async)
    """
    res = view.result(MemoryTransfers)
    if res is None or res.pageable_async.count == 0:
        return
    p = res.pageable_async
    affected, impact = whole(view.acct, p.time_ns)
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=[
            f"{p.count:,} copies, {p.bytes:,} bytes, {ms(p.time_ns)} "
            "(memory_transfer_issues.csv, issue pageable_async)"
        ],
        recommendation=advice("pinned", view.workload),
        title=f"{p.count:,} async copies use pageable host memory",
        affected=affected,
        impact=impact,
        cause=Cause.TRANSFER,
    )


NLE304 = Rule(
    id="NLE304",
    name="pageable-async-copy",
    title="Async copies from pageable memory",
    check=pageable_async_copy,
    metric_ids=("memory_transfers",),
)


MIN_COUNT = 500
MIN_SHARE_PCT = 50.0  # tiny transfers as a share of all transfers


def tiny_transfers(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Many tiny memory transfers (at most 4 KiB each).

    Fires when at least 500 transfers of at most 4 KiB make up at least half of all
    memcpy/memset operations: each costs a fixed API and DMA setup that dwarfs its bytes.
    Impact: their copy time (at most the transfer idle time), over all devices' windows;
    severity from the impact bands (rules/impact.py).

    Example:

        NLE306 low: 12,000 tiny transfers (<= 4 KiB)
        - 12,000 of 12,400 transfers (96.8%), 48.000 ms, 1,200.0 per second
    """
    res = view.result(MemoryTransfers)
    if res is None:
        return
    t, total = res.tiny, res.transfer_count
    share = 100.0 * t.count / total if total else 0.0
    if t.count < MIN_COUNT or share < MIN_SHARE_PCT:
        return
    rate = f", {t.per_s:,.1f} per second" if t.per_s is not None else ""
    affected, impact = whole(view.acct, min(int(t.time_ns), view.acct.total(Cause.TRANSFER)))
    severity = band(impact[1])
    if severity is None:
        return
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=[f"{t.count:,} of {total:,} transfers ({pct(share)}), {ms(t.time_ns)}{rate}"],
        recommendation=[
            "Batch small host-device transfers into one pinned buffer per step, or keep the values "
            "on the GPU."
        ],
        title=f"{t.count:,} tiny transfers (<= {res.tiny_bytes:,} bytes)",
        affected=affected,
        impact=impact,
        cause=Cause.TRANSFER,
    )


NLE306 = Rule(
    id="NLE306",
    name="tiny-transfers",
    title="Many tiny memory transfers",
    check=tiny_transfers,
    metric_ids=("memory_transfers",),
)


LOW_PCT = 25.0  # achieved / PCIe peak per direction
MIN_TIME_NS = 10_000_000  # only copies that add up to 10 ms matter


def slow_host_copies(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Large host-device copies reach less than 25% of the PCIe bandwidth.

    Uses gpu_context's achieved bandwidth of copies of at least 1 MiB (Host-to-Device and
    Device-to-Host) against the PCIe bandwidth per direction from the built-in table, when
    those copies add up to >= 10 ms. Typical causes: pageable host memory, a PCIe link
    running narrower or slower than x16, or a bad NUMA placement. Impact: the copy time a
    link at full speed would save (time x (1 - achieved/reference)); severity from the impact bands (rules/impact.py).

    Example:

        NLE311 medium: Host-to-Device copies on GPU 0 reach 12.0% of PCIe bandwidth
        - 7.7 GB/s achieved vs 64.0 GB/s per direction over 250.000 ms of copies
    """
    res = view.result(GpuContext)
    if res is None:
        return
    for c in res.copy_bandwidth:
        if c.kind == "Device-to-Device" or c.pct_of_reference is None:
            continue
        if c.pct_of_reference >= LOW_PCT or c.time_ns < MIN_TIME_NS:
            continue
        saved = int(c.time_ns * (1.0 - c.pct_of_reference / 100.0))  # at full link speed
        affected, impact = per_device(view.acct, {c.device_id: saved})
        severity = band(impact[1])
        if severity is None:
            continue
        yield rule.finding(
            severity=severity,
            confidence=Confidence.MEDIUM,
            evidence=[
                f"{fmt.sig(c.achieved_gbps)} GB/s achieved vs {fmt.sig(c.reference_gbps)} GB/s "
                "per direction "
                f"over {ms(c.time_ns)} of copies"
            ],
            recommendation=[
                "Pin host memory; check the link with nvidia-smi -q (PCIe generation and "
                "width) and "
                "the process's NUMA placement."
            ],
            title=(f"{c.kind} copies on GPU {c.device_id} reach "
                f"{pct(c.pct_of_reference)} of PCIe bandwidth"),
            affected=affected,
            impact=impact,
            cause=Cause.TRANSFER,
        )


NLE311 = Rule(
    id="NLE311",
    name="slow-host-copies",
    title="Host-device copies far below PCIe bandwidth",
    check=slow_host_copies,
    metric_ids=("gpu_context",),
)


RULES = (NLE208, NLE304, NLE306, NLE311)
