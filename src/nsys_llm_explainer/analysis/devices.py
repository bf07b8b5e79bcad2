"""The GPUs of a trace: each device the trace describes, and each device that ran work
(kernels, copies, memsets) linked to a description even when their ids differ.

A trace may number the devices its kernels ran on apart from the devices it describes
(ROCm's PyTorch profiler traces list deviceProperties id 0 while the kernels run on device 9:
the process sees one GPU, the trace records the machine's index). A device that ran work and
is not described takes the description of the described devices when they are all one model
(same name, compute capability, vendor, SM count and memory): every GPU the trace lists is
that model, so the one that ran work is too. Otherwise it stays without a description.
"""

from __future__ import annotations

import dataclasses

from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.model import GpuInfo
from nsys_llm_explainer.trace.data import TraceData, Unavailable

KEY = "devices:described"


def active_devices(data: TraceData) -> set[int]:
    """Devices with kernels, copies or memsets."""
    out: set[int] = set()
    for loader in (data.kernels, data.memcpy, data.memset):
        try:
            out.update(int(d) for d in distinct_few(loader().device).tolist())
        except Unavailable:
            continue
    return out


def _model(g: GpuInfo) -> tuple[object, ...]:
    return (g.name, g.compute_capability, g.vendor, g.sm_count, g.total_memory_bytes)


def linked(listed: list[GpuInfo], active: set[int]) -> tuple[list[GpuInfo], dict[int, int]]:
    """(every listed GPU and every active one, by device id; {active id: the listed id whose
    description it takes}) (module docstring)."""
    by_id = {g.device_id: g for g in listed}
    models = {_model(g) for g in listed}
    links: dict[int, int] = {}
    if len(models) == 1 and listed[0].name:
        for dev in sorted(active - set(by_id)):
            by_id[dev] = dataclasses.replace(listed[0], device_id=dev)
            links[dev] = listed[0].device_id
    return [by_id[d] for d in sorted(by_id)], links


def described(data: TraceData) -> tuple[list[GpuInfo], dict[int, int]]:
    """linked() over the trace's GPUs and its active devices (cached; a trace that describes
    no GPU reads no activity for it)."""

    def build() -> tuple[list[GpuInfo], dict[int, int]]:
        listed = list(data.gpus())
        return linked(listed, active_devices(data)) if listed else ([], {})

    return data.cached(KEY, build)
