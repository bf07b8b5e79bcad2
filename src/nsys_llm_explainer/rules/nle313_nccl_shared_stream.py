from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.metrics import communication
from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms


def shared(view: RuleInput) -> list[dict[str, Any]]:
    """Per device with communication on a compute stream: device_id, the communication time
    there (at most the device's exposed communication) and the streams."""
    res = view.metric("communication")
    if res is None:
        return []
    out = []
    for d in communication.devices(res.data):
        ns = int(d.get("shared_stream_comm_ns") or 0)
        if ns and d.get("shared_streams"):
            out.append({"device_id": d["device_id"], "ns": min(ns, int(d["exposed_ns"])),
                        "streams": list(d["shared_streams"])})
    return sorted(out, key=lambda r: r["device_id"])


def lines(rows: list[dict[str, Any]]) -> list[str]:
    out = [f"GPU {r['device_id']}: {ms(r['ns'])} of communication on its compute stream "
           f"(streams {', '.join(str(s) for s in r['streams'][:4])}): no compute on that stream can overlap it"
           for r in rows[:8]]
    if len(rows) > 8:
        out.append(f"... and {len(rows) - 8} more devices")
    return out


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    total = sum(r["ns"] for r in rows)
    where = f"GPU {rows[0]['device_id']}" if len(rows) == 1 else f"{len(rows)} GPUs"
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[*lines(rows), f"{ms(total)} of collectives serialized with compute in total"],
        recommendation=advice("comm_stream", view.workload),
        title=f"Communication shares a stream with compute on {where} (its GPU time is in NLE307)",
    )


RULE = Rule(
    id="NLE313",
    name="comm-shared-stream",
    title="Communication on the compute stream",
    check=check,
    metric_ids=("communication",),
)
