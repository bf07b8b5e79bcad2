"""The results about how close the work runs to the hardware: compute_efficiency
(metrics/compute_efficiency.py, computed in compute/efficiency.py), model_utilization
(metrics/model_utilization.py, computed in compute/model_report.py) and ncu
(metrics/ncu_results.py, with --ncu). report.json `metrics.<id>` is each one's to_json();
schema/metrics/<id>.json documents it.

Table rows (operations, kernels, steps) hold the values of their CSV table's record as the
metric computed them: a column pandas holds as floats keeps float values (and NaN where a
figure is missing; report.json writes null)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, ClassVar, Self

from nsys_llm_explainer.frozen import frozen

# A JSON object no reader outside its metric inspects, kept as the metric wrote it.
Json = Mapping[str, object]


_KEYS: dict[type, tuple[tuple[str, str], ...]] = {}  # per record class: (JSON key, field name)


def _row(obj: object) -> dict[str, object]:
    """A flat row: its fields in order, tuples as lists."""
    keys = _KEYS.get(type(obj))
    if keys is None:
        keys = _KEYS[type(obj)] = tuple((f.name.rstrip("_"), f.name) for f in fields(obj))  # type: ignore[arg-type]
    out = {key: getattr(obj, name) for key, name in keys}
    for key, value in out.items():
        if type(value) is tuple:
            out[key] = list(value)
    return out


class _Row:
    """A flat table row (a record class's base: methods only, no fields): built from a record
    of its fields (a CSV table's row), written to report.json as that record."""

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Self:
        return cls(**record)

    def to_json(self) -> dict[str, object]:
        return _row(self)


# ---------------------------------------------------------------- compute_efficiency


@frozen
class Operation(_Row):
    """One operation (operator, input sizes, dtype, device): a row of compute_operations.csv."""

    operator: str
    label: str
    shapes: str
    dtype: str
    compute_dtype: str
    dtype_source: str  # "stated", "assumed", ...
    family: str  # "gemm", "attention", "memory", ...
    direction: str
    device_id: int
    calls: int
    flops: float
    bytes: float
    kernel_ns: int
    pct_of_kernel_time: float
    flops_per_call: float
    tflops: float | None
    gbps: float | None
    flop_per_byte: float | None
    ridge_flop_per_byte: float | None
    bound: str | None
    roof_tflops: float | None
    pct_of_roof: float | None
    implausible: bool
    above_bandwidth: bool
    batch: int | None  # batch, M, N, K of a matrix product
    m: int | None
    n: int | None
    k: int | None
    formula: str
    assumptions: str


@frozen
class ComputeKernel(_Row):
    """One kernel name on one device and dtype class: a row of compute_kernels.csv."""

    name: str
    device_id: int
    compute_dtype: str
    family: str
    calls: int
    flops: float
    bytes: float
    kernel_ns: int
    tflops: float | None
    gbps: float | None
    flop_per_byte: float | None
    ridge_flop_per_byte: float | None
    bound: str | None
    roof_tflops: float | None
    pct_of_roof: float | None
    implausible: bool
    above_bandwidth: bool
    math_dtype: str | None
    tensor_cores: bool | None
    operator: str  # the operators that launched it, with their kernel counts
    unclaimed_calls: int


@frozen
class ComputeTotals:
    operations: int
    calls: int
    costed_calls: int
    calls_without_kernels: int
    flops: float
    bytes: float
    kernel_ns: int
    total_kernel_ns: int
    coverage_pct: float
    tflops: float | None
    uncovered_kernel_ns: int
    implausible_operations: int
    above_bandwidth_operations: int


@frozen
class FamilyRow:
    """The operations of one family ("gemm", "memory", ...) summed."""

    family: str
    calls: int
    flops: float
    bytes: float
    kernel_ns: int
    pct_of_kernel_time: float
    tflops: float | None
    gbps: float | None


@frozen
class DtypeRoof:
    dtype: str
    peak_tflops: float
    bandwidth_gbps: float
    ridge_flop_per_byte: float


@frozen
class ComputeRoofline:
    """The roofline the plot draws: the device with the most kernel time in operations with FLOPs."""

    device_id: int
    model: str | None
    peaks_basis: str
    roofs: tuple[DtypeRoof, ...]
    operations: int

    def to_json(self) -> dict[str, object]:
        return {"device_id": self.device_id, "model": self.model, "peaks_basis": self.peaks_basis,
                "roofs": [_row(r) for r in self.roofs], "operations": self.operations}


@frozen
class Uncovered:
    """Kernel time outside every counted call, by the innermost operator around the launch."""

    operator: str
    kernels: int
    kernel_ns: int
    reason: str


@frozen
class ComputeEfficiency:
    METRIC_ID: ClassVar[str] = "compute_efficiency"

    source: str  # "kineto", "nvtx"
    shapes_from: str
    devices: tuple[Json, ...]  # compute/peaks.py DevicePeaks.describe per device
    peak_table: str
    totals: ComputeTotals
    by_family: tuple[FamilyRow, ...]  # most kernel time first
    by_operator: tuple[Json, ...]  # operations summed per operator, dtype and device
    roofline: ComputeRoofline | None
    operations: tuple[Operation, ...]  # most kernel time first
    kernels: tuple[ComputeKernel, ...]  # most kernel time first
    uncovered: tuple[Uncovered, ...]

    def family(self, name: str) -> FamilyRow | None:
        return next((f for f in self.by_family if f.family == name), None)

    def to_json(self) -> dict[str, object]:
        return {
            "source": self.source,
            "shapes_from": self.shapes_from,
            "devices": [dict(d) for d in self.devices],
            "peak_table": self.peak_table,
            "totals": _row(self.totals),
            "by_family": [_row(f) for f in self.by_family],
            "by_operator": [dict(o) for o in self.by_operator],
            "roofline": self.roofline.to_json() if self.roofline is not None else None,
            "operations": [o.to_json() for o in self.operations],
            "kernels": [k.to_json() for k in self.kernels],
            "uncovered": [_row(u) for u in self.uncovered],
        }


# ---------------------------------------------------------------- model_utilization


@frozen
class UtilizationInputs:
    model_config: str | None  # the --model file's base name
    model_flops_per_token: float | None
    tokens_per_step: int | None
    parameters: int | None
    matmul_parameters: int | None
    dtype: str
    peak_dtype: str
    dtype_from: str
    steps_from: str


@frozen
class UtilizationPhase(_Row):
    """The steps of one phase summed: MFU, MBU and HFU over their time."""

    phase: str
    kind: str  # decode, prefill, training, forward
    compute_heavy: bool
    steps: int
    time_ns: int
    tokens: float | None
    model_flops: float | None
    mfu_pct: float | None
    mfu_min_pct: float | None
    mfu_max_pct: float | None
    bytes: float | None
    mbu_pct: float | None
    measured_flops: float | None
    hfu_pct: float | None
    gpus: int
    device_ids: tuple[int, ...]
    inputs: tuple[str, ...]  # every input the figures used, in words
    warnings: tuple[str, ...]  # failed plausibility checks


@frozen
class UtilizationStep(_Row):
    """One step: a row of model_utilization_steps.csv."""

    step: int
    phase: str
    pid: int
    latency_ns: int
    window_ns: int
    kind: str
    tokens: float | None
    batch: float | None
    context: float | None
    gpus: int
    flops_per_token: float | None
    model_flops: float | None
    mfu_pct: float | None
    bytes_per_step: float | None
    mbu_pct: float | None
    measured_flops: float | None
    hfu_pct: float | None
    peak_tflops: float | None
    bandwidth_gbps: float | None
    kind_from: str
    tokens_from: str
    flops_from: str
    head_from: str
    bytes_from: str


@frozen
class ModelUtilization:
    METRIC_ID: ClassVar[str] = "model_utilization"

    inputs: UtilizationInputs
    phases: tuple[UtilizationPhase, ...]
    steps: tuple[UtilizationStep, ...]
    missing: tuple[str, ...]  # the figures not computed, with the input each needs

    def phase(self, name: str) -> UtilizationPhase | None:
        return next((p for p in self.phases if p.phase == name), None)

    def to_json(self) -> dict[str, object]:
        return {
            "inputs": _row(self.inputs),
            "phases": [p.to_json() for p in self.phases],
            "steps": [s.to_json() for s in self.steps],
            "missing": list(self.missing),
        }


# ---------------------------------------------------------------- ncu (--ncu)


@frozen
class NcuPoint:
    """A launch's roofline point (ncu/results.py _point)."""

    precision: str
    tensor: bool
    flops: float
    flop_per_byte: float | None
    achieved_tflops: float | None
    peak_tflops: float | None
    bandwidth_gbps: float | None
    roof_tflops: float | None
    pct_of_roof: float | None
    bound: str | None
    peaks_basis: str
    reason: str | None
    dram_only: bool
    note: str | None


@frozen
class NcuRule:
    """One of ncu's own rule results for a launch (OPT, WRN, ERR), largest speedup first."""

    section: str
    name: str
    type: str
    speedup_type: str | None
    speedup_pct: float | None
    text: str


@frozen
class NcuLaunch:
    """One Nsight Compute launch. `json` is the launch object as ncu.json writes it (with the
    match to the trace added); the fields are the parts of it the rules read."""

    index: int
    kernel: str
    matched_kernel: str | None
    roofline: NcuPoint | None
    ncu_rules: tuple[NcuRule, ...]
    json: Json

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> NcuLaunch:
        point = doc.get("roofline")
        return cls(
            index=int(doc["index"]),
            kernel=str(doc["kernel"]),
            matched_kernel=doc.get("matched_kernel"),
            roofline=NcuPoint(**point) if point else None,
            ncu_rules=tuple(NcuRule(**r) for r in doc.get("ncu_rules") or ()),
            json=doc,
        )

    def to_json(self) -> dict[str, object]:
        return dict(self.json)


@frozen
class NcuDevice:
    device_id: int
    total_ns: int
    stake_ns: int | None


@frozen
class NcuKernel:
    """A kernel of the trace matched to ncu launches: the trace's time beside ncu's figures."""

    name: str
    devices: tuple[NcuDevice, ...]
    calls: int
    total_ns: int
    p50_ns: float
    pct_of_kernel_time: float
    matched_by: str  # "mangled", "demangled", "short"
    ncu_kernel: str
    ncu_launches: tuple[int, ...]
    class_: str | None  # report.json "class"
    pct_of_roof: float | None
    stake_ns: int | None  # trace time x (1 - pct_of_roof / 100): an upper bound
    limiter: str | None
    causes: tuple[str, ...]
    sm_pct: float | None
    memory_pct: float | None
    longest_launch: int | None
    roofline_pct_of_roof: float | None
    ncu_p50_ns: float | None
    duration_ratio: float | None
    ratio_far: bool

    def to_json(self) -> dict[str, object]:
        out = _row(self)
        out["devices"] = [_row(d) for d in self.devices]
        return out


@frozen
class NcuUnmatched:
    index: int
    kernel: str
    reason: str


@frozen
class NcuMatch:
    launches: int
    matched: int
    by: Mapping[str, int]  # matched launches per way: mangled, demangled, short
    kernels: int
    unmatched: tuple[NcuUnmatched, ...]
    duration_factor: float
    shapes: str

    def to_json(self) -> dict[str, object]:
        out = _row(self)
        out["by"] = dict(self.by)
        out["unmatched"] = [_row(u) for u in self.unmatched]
        return out


@frozen
class NcuResults:
    METRIC_ID: ClassVar[str] = "ncu"

    launch_count: int
    kernel_count: int
    classified: int
    classes: Mapping[str, int]
    thresholds: Mapping[str, float]
    files: tuple[Json, ...]
    ratio_far: float
    match: NcuMatch
    total_kernel_ns: int
    kernels: tuple[NcuKernel, ...]  # most time at stake first
    launches: tuple[NcuLaunch, ...]

    def launch(self, index: int | None) -> NcuLaunch | None:
        return next((d for d in self.launches if d.index == index), None)

    def to_json(self) -> dict[str, object]:
        return {
            "launch_count": self.launch_count,
            "kernel_count": self.kernel_count,
            "classified": self.classified,
            "classes": dict(self.classes),
            "thresholds": dict(self.thresholds),
            "files": [dict(f) for f in self.files],
            "ratio_far": self.ratio_far,
            "match": self.match.to_json(),
            "total_kernel_ns": self.total_kernel_ns,
            "kernels": [k.to_json() for k in self.kernels],
            "launches": [d.to_json() for d in self.launches],
        }
