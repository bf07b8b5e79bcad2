"""Where each device's time went: one set of buckets per device that sums to its window.

The window of a device runs from its first to its last activity (its own work: kernels,
whole-graph executions, device-local copies and memsets; and transfers), so transfers before
the first work or after the last one count (a capture that is mostly copying shows it).
Buckets, from the metrics that measured them:

- compute: busy time that is not communication-only (gpu_idle busy minus communication's
  exposed time): kernels, graph executions, device-local copies and memsets.
- exposed_communication: communication kernels running with no compute kernel beside them.
- transfer: idle time a transfer covers (idle_causes), plus transfers outside the work
  window.
- communication_wait, sync_wait, launch_bound, host_other, device_wait, capture_edge:
  idle_causes' split. Activity-window time outside the work window that no transfer covers
  is capture_edge; without CUDA API rows every idle nanosecond is capture_edge (unexplained).

The time at stake of a cause is a ceiling: what the device would get back if the cause
disappeared. capture_edge (the host is not visible there) and device_wait (the GPU had its
next work queued and waited on something the trace does not name) belong to no cause.
"""

from __future__ import annotations

from dataclasses import field
from typing import Literal

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import Bucket, Cause, IdleCause, JsonObject, Outcome, typed_result
from nsys_llm_explainer.results.devices import Communication, GpuIdle, IdleCauses

BUCKETS: tuple[Bucket, ...] = tuple(Bucket)
IDLE_BUCKETS = BUCKETS[2:]
# "busy" is the one busy figure of the report (the device's own work, communication kernels
# included), not a cause; totals take it beside the causes.
BUSY: Literal["busy"] = "busy"
Figure = Cause | Literal["busy"]
# Verdict causes (and busy) -> the buckets whose time they put at stake.
CAUSE_BUCKETS: dict[Figure, tuple[Bucket, ...]] = {
    BUSY: (Bucket.COMPUTE, Bucket.EXPOSED_COMMUNICATION),
    Cause.COMPUTE: (Bucket.COMPUTE,),
    Cause.TRANSFER: (Bucket.TRANSFER,),
    Cause.COMMUNICATION: (Bucket.EXPOSED_COMMUNICATION, Bucket.COMMUNICATION_WAIT),
    Cause.SYNC: (Bucket.SYNC_WAIT,),
    Cause.HOST: (Bucket.LAUNCH_BOUND, Bucket.HOST_OTHER),
}
_IDLE_TO_BUCKET: dict[IdleCause, Bucket] = {
    IdleCause.TRANSFER: Bucket.TRANSFER, IdleCause.COMMUNICATION: Bucket.COMMUNICATION_WAIT,
    IdleCause.SYNC_WAIT: Bucket.SYNC_WAIT, IdleCause.LAUNCH_BOUND: Bucket.LAUNCH_BOUND,
    IdleCause.HOST_OTHER: Bucket.HOST_OTHER, IdleCause.CAPTURE_EDGE: Bucket.CAPTURE_EDGE,
    IdleCause.DEVICE_WAIT: Bucket.DEVICE_WAIT,
}


@frozen
class DeviceAccount:
    device_id: int
    window_start_ns: int
    window_end_ns: int
    pids: tuple[int, ...]
    buckets: dict[Bucket, int]
    steady: dict[Bucket, int] | None = None  # idle buckets from the steady start on
    steady_window_ns: int | None = None

    @property
    def window_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    def cause_ns(self, cause: Figure, steady: bool = False) -> int:
        source = self.steady if steady and self.steady is not None else self.buckets
        return sum(source.get(b, 0) for b in CAUSE_BUCKETS[cause])

    def before_steady_ns(self) -> int:
        """Idle time outside the steady part: before it begins (all idle time when no steady
        part follows); the GPU time start-up costs."""
        idle = sum(self.buckets[b] for b in IDLE_BUCKETS)
        steady = sum(self.steady.get(b, 0) for b in IDLE_BUCKETS) if self.steady is not None else 0
        return max(0, idle - steady)

    def pct(self, ns: int, steady: bool = False) -> float:
        window = self.steady_window_ns if steady and self.steady_window_ns else self.window_ns
        return 100.0 * ns / window if window > 0 else 0.0

    def to_json(self) -> JsonObject:
        w = self.window_ns
        return {
            "device_id": self.device_id,
            "window_start_ns": self.window_start_ns,
            "window_end_ns": self.window_end_ns,
            "window_ns": w,
            "pids": list(self.pids),
            "buckets": [
                {"bucket": b, "ns": ns, "pct_of_window": round(100.0 * ns / w, 2) if w else 0.0}
                for b, ns in ((b, self.buckets[b]) for b in BUCKETS)
            ],
        }


@frozen
class Accounting:
    devices: tuple[DeviceAccount, ...] = field(default_factory=tuple)

    def device(self, device_id: int) -> DeviceAccount | None:
        return next((d for d in self.devices if d.device_id == device_id), None)

    def chosen(self, devices: list[int]) -> list[DeviceAccount]:
        return [d for d in self.devices if d.device_id in devices]

    def total(self, cause: Figure, steady: bool = False) -> int:
        return sum(d.cause_ns(cause, steady) for d in self.devices)

    def bucket_total(self, *buckets: Bucket) -> int:
        return sum(d.buckets[b] for d in self.devices for b in buckets)

    def window(self) -> int:
        return sum(d.window_ns for d in self.devices)


def build(metrics: dict[str, Outcome]) -> Accounting:
    """Per-device buckets from gpu_idle, idle_causes and communication ([] without them)."""
    gi = typed_result(metrics, GpuIdle)
    if gi is None:
        return Accounting()
    comm = typed_result(metrics, Communication)
    exposed = {d.device_id: d.exposed_ns for d in comm.devices} if comm is not None else {}
    ic = typed_result(metrics, IdleCauses)
    split = {d.device_id: d for d in ic.devices} if ic is not None else {}
    out = []
    for d in gi.devices:
        dev = d.device_id
        buckets = dict.fromkeys(BUCKETS, 0)
        exp = min(exposed.get(dev, 0), d.busy_ns)
        buckets[Bucket.COMPUTE] = d.busy_ns - exp
        buckets[Bucket.EXPOSED_COMMUNICATION] = exp
        s = split.get(dev)
        w0, w1 = d.window_start_ns, d.window_end_ns
        steady, steady_window = None, None
        if s is not None:
            for c in s.causes:
                buckets[_IDLE_TO_BUCKET[c.cause]] += c.idle_ns
            a0, a1 = s.activity_start_ns, s.activity_end_ns
            edge = s.edge_transfer_ns
            buckets[Bucket.TRANSFER] += edge
            buckets[Bucket.CAPTURE_EDGE] += (a1 - a0) - (w1 - w0) - edge
            w0, w1 = a0, a1
            part = s.steady
            if part is not None:
                steady = {_IDLE_TO_BUCKET[c]: int(ns) for c, ns in part.causes.items()}
                steady_window = d.window_end_ns - part.start_ns
        else:  # no CUDA API rows: idle time cannot be split, so it stays unexplained
            buckets[Bucket.CAPTURE_EDGE] += d.idle_ns
        pids = s.owner_pids if s is not None else ()
        out.append(DeviceAccount(dev, w0, w1, pids, buckets, steady, steady_window))
    return Accounting(tuple(out))
