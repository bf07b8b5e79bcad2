"""gpu_context: what each GPU is (TARGET_INFO_GPU) and what it could do (gpu_specs table, with
the --gpu-peaks file's entries):
dense peak TFLOPS, HBM bandwidth, ridge point, and achieved copy bandwidth against peak.

Achieved copy bandwidth uses copies of at least LARGE_COPY_BYTES only (smaller copies
measure fixed overhead, not bandwidth): sum(bytes) / sum(duration) per device and kind.
Host-to-Device and Device-to-Host compare with the PCIe bandwidth per direction;
Device-to-Device compares with half the HBM bandwidth, since a copy reads and writes
every byte.
"""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from nsys_llm_explainer.analysis import devices
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.peaks import peak_table
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import GpuInfo, MetricResult, Outcome, Table
from nsys_llm_explainer.results.devices import CopyBandwidth, GpuContext, GpuRow
from nsys_llm_explainer.trace.data import Unavailable

LARGE_COPY_BYTES = 1 << 20
COPY_REFERENCE = {
    1: ("Host-to-Device", "host_link"),
    2: ("Device-to-Host", "host_link"),
    8: ("Device-to-Device", "hbm_half"),
}
COLUMNS = (
    "device_id",
    "name",
    "known",
    "model",
    "sm_count",
    "total_memory_bytes",
    "trace_memory_bandwidth_gbps",
    "tf32_tflops",
    "bf16_tflops",
    "fp8_tflops",
    "hbm_gbps",
    "host_link_gbps",
    "ridge_bf16_flop_per_byte",
    "source",
)
COPY_COLUMNS = (
    "device_id",
    "kind",
    "count",
    "bytes",
    "time_ns",
    "achieved_gbps",
    "reference_gbps",
    "pct_of_reference",
)


def _copies(ctx: Context, specs: dict[int, peaks.GpuSpec | None]) -> list[CopyBandwidth]:
    try:
        m = ctx.data.memcpy()
    except Unavailable:
        return []
    rows = []
    big = m.bytes >= LARGE_COPY_BYTES
    for dev in sorted(specs):
        for code, (label, ref) in COPY_REFERENCE.items():
            sel = big & (m.device == dev) & (m.copy_kind == code)
            if not sel.any():
                continue
            nbytes, t = int(m.bytes[sel].sum()), int(m.dur[sel].sum())
            spec = specs[dev]
            reference = None
            if spec is not None:
                reference = spec.host_link_gbps if ref == "host_link" else spec.hbm_gbps / 2
            achieved = round(nbytes / t, 3) if t > 0 else None
            rows.append(
                CopyBandwidth(
                    device_id=dev,
                    kind=label,
                    count=int(sel.sum()),
                    bytes=nbytes,
                    time_ns=t,
                    achieved_gbps=achieved,
                    reference_gbps=reference,
                    pct_of_reference=round(100.0 * achieved / reference, 1)
                    if achieved and reference
                    else None,
                )
            )
    return rows


def _gpu_row(g: GpuInfo, spec: peaks.GpuSpec | None, active: bool, linked: int | None) -> GpuRow:
    bw = g.memory_bandwidth_bytes_per_s
    return GpuRow(
        device_id=g.device_id,
        name=g.name,
        active=active,
        known=spec is not None,
        model=spec.model if spec else None,
        sm_count=g.sm_count,
        total_memory_bytes=g.total_memory_bytes,
        trace_memory_bandwidth_gbps=round(bw / 1e9, 1) if bw else None,
        clock_hz=g.clock_hz,
        tf32_tflops=spec.tf32_tflops if spec else None,
        bf16_tflops=spec.bf16_tflops if spec else None,
        fp8_tflops=spec.fp8_tflops if spec else None,
        hbm_gbps=spec.hbm_gbps if spec else None,
        host_link_gbps=spec.host_link_gbps if spec else None,
        ridge_flop_per_byte=peaks.ridge_points(spec) if spec else None,
        source=spec.source if spec else None,
        described_as=linked,
    )


def run(ctx: Context) -> Outcome:
    if not ctx.data.gpus():
        return METRIC.skipped(ctx.data.gpus_missing_reason())
    gpus, links = devices.described(ctx.data)
    active = devices.active_devices(ctx.data)
    # The built-in table, with the --gpu-peaks file's entries replacing or adding models.
    try:
        table = peak_table(ctx.options.gpu_peaks).by_name
    except UsageError as exc:
        return METRIC.skipped(exc.message)
    specs = {g.device_id: peaks.lookup(g.name, table) for g in gpus}
    rows = [_gpu_row(g, specs[g.device_id], g.device_id in active, links.get(g.device_id)) for g in gpus]
    unknown = sorted({g.name or "(no name)" for g in gpus if specs[g.device_id] is None})
    copies = _copies(ctx, {d: s for d, s in specs.items() if d in active})
    notes = []
    if unknown:
        notes.append(
            f"no built-in peak figures for {', '.join(unknown)}: peak context not shown for them"
        )
    missing = sorted(active - set(specs))
    if missing:
        notes.append(f"devices {missing} have activity but the trace does not describe them")
    names = {g.device_id: g.name for g in gpus}
    for dev, listed in sorted(links.items()):
        notes.append(f"device {dev} ran work but the trace describes device {listed} ({names[listed]}) only, "
                     f"one model for every GPU it lists: device {dev} is that model")
    flat = [
        {
            **{k: getattr(r, k) for k in COLUMNS if k != "ridge_bf16_flop_per_byte"},
            "ridge_bf16_flop_per_byte": (r.ridge_flop_per_byte or {}).get("bf16"),
        }
        for r in rows
    ]
    result = GpuContext(
        gpus=tuple(rows),
        unknown_models=tuple(unknown),
        devices_without_info=tuple(missing),
        large_copy_bytes=LARGE_COPY_BYTES,
        copy_bandwidth=tuple(copies),
    )
    tables = (
        Table("gpu_context", COLUMNS, pd.DataFrame(flat, columns=list(COLUMNS))),
        Table("gpu_copy_bandwidth", COPY_COLUMNS,
              pd.DataFrame([asdict(c) for c in copies], columns=list(COPY_COLUMNS))),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, tuple(notes), typed=result)


METRIC = Metric(
    id="gpu_context",
    order=210,
    title="GPU context: peaks and achieved copy bandwidth",
    run=run,
    tables={"gpu_context": COLUMNS, "gpu_copy_bandwidth": COPY_COLUMNS},
    description=(
        "GPU models, dense peak TFLOPS and HBM bandwidth from a built-in datasheet "
        "table, ridge point, copy bandwidth vs peak."
    ),
)
