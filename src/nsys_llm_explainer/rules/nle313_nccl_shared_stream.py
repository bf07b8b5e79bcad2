from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms
from nsys_llm_explainer.rules.idle_cause_common import device_lines, devices_phrase, where
from nsys_llm_explainer.rules.impact import band, per_device


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Communication kernels run on the same stream as compute kernels, so they cannot overlap
    that stream's compute by construction.

    From the communication metric: per device, the streams that run both communication and
    compute kernels and the union of the communication kernels on them. Impact: that time, at
    most the device's exposed communication (what compute did not hide), over the device's
    window; severity from the impact bands (rules/impact.py).

    Example:

        NLE313 medium: Communication shares a stream with compute on 8 GPUs (9.4% of 8 GPUs' time)
        - GPU 0: 94.000 ms of communication on its compute stream (9.4% of its window); streams 7
    """
    res = view.metric("communication")
    if res is None:
        return
    ns, detail = {}, {}
    for d in res.data["devices"]:
        shared = int(d.get("shared_stream_comm_ns") or 0)
        if shared and d.get("shared_streams"):
            ns[d["device_id"]] = min(shared, int(d["exposed_ns"]))
            detail[d["device_id"]] = "streams " + ", ".join(str(s) for s in d["shared_streams"][:4])
    affected, impact = per_device(view.acct, ns)
    affected = tuple(replace(a, detail=detail.get(a.device_id or 0, "")) for a in affected)
    severity = band(impact[1])
    if severity is None:
        return
    evidence = device_lines(affected, "of communication on its compute stream")
    evidence.append(f"{ms(impact[0])} of collectives serialized with compute in total")
    yield rule.finding(
        severity, Confidence.HIGH, evidence,
        ("Run collectives on their own stream (NCCL's default in DDP/FSDP; with custom code, a "
         "`torch.cuda.Stream()` per communicator) and make the consumer wait on an event, so "
         "compute on the main stream can overlap them.", *advice("communication", view.workload)),
        title=f"Communication shares a stream with compute on {devices_phrase(affected)} "
        f"({impact[1]:.1f}% of {where(affected)} time)",
        affected=affected, impact=impact, cause="communication",
    )


RULE = Rule("NLE313", "comm-shared-stream", "Communication on the compute stream", check, ("communication",))
