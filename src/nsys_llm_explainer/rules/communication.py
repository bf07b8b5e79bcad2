"""Communication: collectives not overlapped by compute (NLE307), communication time skewed
across ranks (NLE308), communication on the compute stream (NLE313)."""

from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.evidence import dependency_lines
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.results.devices import CommDevice, Communication, IdleCauses
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import band, cause_finding, whole


def shared(view: RuleInput) -> list[tuple[CommDevice, int]]:
    """Per device with communication on a compute stream: the device's row and the
    communication time there (at most the device's exposed communication)."""
    res = view.result(Communication)
    if res is None:
        return []
    out = [(d, min(d.shared_stream_comm_ns, d.exposed_ns)) for d in res.devices
           if d.shared_stream_comm_ns and d.shared_streams]
    return sorted(out, key=lambda r: r[0].device_id)


def lines(rows: list[tuple[CommDevice, int]]) -> list[str]:
    out = [f"GPU {d.device_id}: {ms(ns)} of communication on its compute stream "
           f"(streams {', '.join(str(s) for s in d.shared_streams[:4])}): no compute on that stream can overlap it"
           for d, ns in rows[:8]]
    if len(rows) > 8:
        out.append(f"... and {len(rows) - 8} more devices")
    return out


def comm_shared_stream(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Communication kernels run on the same stream as compute kernels, so they cannot overlap
    that stream's compute by construction.

    From the communication metric: per device, the streams that run both communication and
    compute kernels and the union of the communication kernels on them (at most the device's
    exposed communication). This is why the communication NLE307 reports is exposed, not a
    second cause: the GPU time at stake is NLE307's, so this note carries no impact of its
    own (INFO) and NLE307 quotes the same lines. The advice depends on the workload: in
    tensor-parallel inference the next layer needs the all-reduce's result, so a separate
    stream alone gains nothing (make the collective shorter or fuse it); gradient
    collectives in training belong on their own stream.

    Example:

        NLE313 info: Communication shares a stream with compute on 8 GPUs (its GPU time is in NLE307)
        - GPU 0: 94.000 ms of communication on its compute stream (streams 7): no compute on that stream can overlap it
    """
    rows = shared(view)
    if not rows:
        return
    total = sum(ns for _, ns in rows)
    where = f"GPU {rows[0][0].device_id}" if len(rows) == 1 else f"{len(rows)} GPUs"
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[*lines(rows), f"{ms(total)} of collectives serialized with compute in total"],
        recommendation=advice("comm_stream", view.workload),
        title=f"Communication shares a stream with compute on {where} (its GPU time is in NLE307)",
    )


NLE313 = Rule(
    id="NLE313",
    name="comm-shared-stream",
    title="Communication on the compute stream",
    check=comm_shared_stream,
    metric_ids=("communication",),
)


def exposed_communication(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Communication the GPU waits for: collectives with no compute beside them, idle time while
    the host is inside a communication call, and idle time with work already queued behind a
    collective's dependency (idle_causes dependency_ns).

    When collectives run on a stream that also runs compute (NLE313), the evidence says so per
    device: that is why they are exposed, and the advice for it comes first; when they already
    run on their own streams, the advice does not tell to move them there. When most of the
    time is queued work waiting on collectives (after one ended, or while one queued earlier had
    not started: idle_causes dependency_ns, behind_collective_ns), the wait is on what the
    collectives wait for (the other ranks), so checking every rank for a straggler comes first;
    when most is behind collectives that had not started, the confidence is medium (what they
    waited on is outside a one-rank trace).

    Impact: per device, the exposed communication time (communication kernels minus the part
    compute kernels on the same device overlap; another GPU computing never hides this one's
    communication) plus the idle time idle_causes labels communication. Severity from the
    impact bands (rules/impact.py).

    Example:

        NLE307 high: GPU waits on communication (31.0% of 8 GPUs' time)
        - GPU 1: 310.000 ms in collectives with no compute beside them, or idle waiting on them (31.0% of its window)
        - GPU 1: 400.000 ms of communication kernels, 22.5% overlapped by compute
    """
    res = view.result(Communication)
    evidence = []
    with_kernels = [d for d in (res.devices if res is not None else ()) if d.comm_union_ns]
    for d in with_kernels[:4]:
        evidence.append(f"GPU {d.device_id}: {ms(d.comm_union_ns)} of communication kernels, "
                        f"{pct(d.overlap_pct or 0)} overlapped by compute")
    if not with_kernels:
        evidence.append("no communication kernels ran: the time is GPU idle while the driving processes "
                        "were inside host-side communication calls (NVTX ranges named like MPI_Send, "
                        "MPI_Recv, gloo or c10d collectives)")
    waits = dependency_lines(view.metrics, [d.device_id for d in view.acct.devices])
    evidence += waits
    on_compute = shared(view)
    evidence += lines(on_compute)
    if on_compute:
        recommendations = (*advice("comm_stream", view.workload), *advice("communication", view.workload))
    elif with_kernels:
        recommendations = advice("communication_overlap", view.workload)
    else:
        recommendations = advice("host_communication", view.workload)
    queued = _queued_on_collectives(view)
    total = view.acct.total(Cause.COMMUNICATION)
    mostly_waits = bool(total) and 2 * queued[0] >= total
    if waits and with_kernels:
        peer = advice("peer_wait", view.workload)
        recommendations = (*peer, *recommendations) if mostly_waits else (*recommendations, *peer)
    inferred = bool(total) and 2 * queued[1] >= total
    f = cause_finding(
        view,
        rule,
        buckets=(Bucket.EXPOSED_COMMUNICATION, Bucket.COMMUNICATION_WAIT),
        cause=Cause.COMMUNICATION,
        title="GPU waits on communication ({pct} of {where} time)",
        what="in collectives with no compute beside them, or idle waiting on them",
        evidence=evidence,
        recommendations=tuple(dict.fromkeys(recommendations)),
        confidence=Confidence.MEDIUM if inferred else Confidence.HIGH,
    )
    if f is not None:
        yield f


def _queued_on_collectives(view: RuleInput) -> tuple[int, int]:
    """(queued idle time waiting on collectives, the part of it behind collectives that had not
    started) over every device (idle_causes)."""
    ic = view.result(IdleCauses)
    rows = ic.devices if ic is not None else ()
    behind = sum(d.behind_collective_ns for d in rows)
    return behind + sum(d.dependency_ns for d in rows), behind


NLE307 = Rule(
    id="NLE307",
    name="exposed-communication",
    title="Communication not overlapped by compute",
    check=exposed_communication,
    metric_ids=("communication", "idle_causes"),
)


MEDIUM_SKEW_PCT = 30.0
MIN_COMM_NS = 1_000_000  # ignore skew over less than 1 ms of communication


def communication_skew(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Communication kernel time differs a lot between ranks (devices or processes).

    Collectives wait for the slowest rank, so the fast ranks' NCCL kernels spin longer: a
    spread of >= 30% ((max - min) / max, with max >= 1 ms) points at a straggler or at
    uneven work per rank. Impact: max - min communication time, over all devices' windows;
    severity from the impact bands (rules/impact.py).

    Example:

        NLE308 medium: Communication time differs 45.0% across devices
        - from 110.000 ms to 200.000 ms of communication kernel time
    """
    res = view.result(Communication)
    if res is None:
        return
    for label, s in (("devices", res.device_skew), ("processes", res.process_skew)):
        if s is None or s.max_ns < MIN_COMM_NS or s.skew_pct < MEDIUM_SKEW_PCT:
            continue
        affected, impact = whole(view.acct, s.max_ns - s.min_ns)
        severity = band(impact[1])
        if severity is None:
            return
        yield rule.finding(
            severity=severity,
            confidence=Confidence.MEDIUM,
            evidence=[
                f"from {ms(s.min_ns)} to {ms(s.max_ns)} of communication kernel time "
                f"across {label}"
            ],
            recommendation=[
                "The rank with the least communication time is the straggler the others wait for: "
                "compare its compute kernels and host gaps with the other ranks."
            ],
            title=f"Communication time differs {pct(s.skew_pct)} across {label}",
            affected=affected,
            impact=impact,
            cause=Cause.COMMUNICATION,
        )
        return


NLE308 = Rule(
    id="NLE308",
    name="communication-skew",
    title="Communication time skewed across ranks",
    check=communication_skew,
    metric_ids=("communication",),
)


RULES = (NLE307, NLE308, NLE313)
