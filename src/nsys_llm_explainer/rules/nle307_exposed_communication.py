from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.evidence import dependency_lines
from nsys_llm_explainer.metrics import communication, idle_causes
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct
from nsys_llm_explainer.rules.idle_cause_common import cause_finding
from nsys_llm_explainer.rules.nle313_nccl_shared_stream import lines, shared


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    res = view.metric("communication")
    evidence = []
    with_kernels = [d for d in communication.devices(res.data if res is not None else {}) if d["comm_union_ns"]]
    for d in with_kernels[:4]:
        evidence.append(f"GPU {d['device_id']}: {ms(d['comm_union_ns'])} of communication kernels, "
                        f"{pct(d['overlap_pct'] or 0)} overlapped by compute")
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
    res = view.metric("idle_causes")
    rows = idle_causes.devices(res.data if res is not None else {})
    behind = sum(int(d.get("behind_collective_ns") or 0) for d in rows)
    return behind + sum(int(d.get("dependency_ns") or 0) for d in rows), behind


RULE = Rule(
    id="NLE307",
    name="exposed-communication",
    title="Communication not overlapped by compute",
    check=check,
    metric_ids=("communication", "idle_causes"),
)
