"""GPU peak figures and the roofline they make: the built-in table, which peaks apply to each
device, and the roofline arithmetic.

Which peaks apply to a device: the built-in table (gpu_specs), a user's --gpu-peaks file,
or, when the export names no GPU, a representative GPU of the architecture family the
kernel names require, labelled assumed.

--gpu-peaks FILE.json has the format of the built-in table (docs/compute.md):

    {"gpus": [{"names": ["NVIDIA H100 80GB HBM3"], "bf16_tflops": 900, "hbm_gbps": 3000},
              {"names": ["My Lab GPU"], "model": "X1", "arch": "hopper",
               "fp8_tflops": 1500, "bf16_tflops": 750, "hbm_gbps": 2500}]}

An entry whose name is in the built-in table replaces that entry (all of it: figures it
omits become unknown); other names are added. The name "*" applies to every device the
table has no entry for, including an export that names no GPU. Errors are one-line
UsageErrors.

Built-in peak figures of common data-center and workstation GPUs, for context only.

The table lives in data/gpu_specs.json, in the same format as a user's --gpu-peaks file
(parsed by `parse_table` below, so one validator covers both). Every number is the vendor's
published *dense* (no 2:4 sparsity) peak, taken from the document named in `source`; where a
datasheet prints only the sparse figure (marked "*" there), the dense figure is half of it.

Per-dtype peaks, in TFLOPS (INT8 in TOPS), None where the GPU has no such unit or the vendor
publishes no figure:

- fp64: FP64 on the CUDA cores; fp64_tensor: FP64 on Tensor Cores (A100, H100, B200).
- fp32: FP32 on the CUDA cores (non-tensor): what a float32 GEMM gets without TF32.
- tf32, bf16, fp16, fp8, int8: Tensor Core peaks. BF16/FP16 is with FP32 accumulation (what
  LLM frameworks use; GeForce cards run FP16-accumulate at twice that rate).

`hbm_gbps` is device memory bandwidth in GB/s (1e9 bytes/s; GDDR on the cards that have it).
`host_link_gbps` is the PCIe bandwidth per direction (datasheets print the bidirectional
figure; half of it) or None where the datasheet gives none.

Lookup is by the exact CUDA device name as TARGET_INFO_GPU (or Kineto's deviceProperties)
stores it, e.g. "NVIDIA H100 80GB HBM3". A name not in the table is reported as unknown: no
figure is ever guessed from a similar name.

Roofline arithmetic: ridge points, attainable FLOP/s, bound classification, efficiency
against the roof, and the sanity check that catches impossible numbers.

For a dtype with dense peak P (FLOP/s) on a GPU with memory bandwidth W (B/s), an operation
of arithmetic intensity I = FLOPs / bytes can reach at most min(P, I * W) FLOP/s. The ridge
point I* = P / W separates memory-bound (I < I*) from compute-bound (I >= I*) operations.
Efficiency is achieved FLOP/s over that roof; for a bytes-only operation (no FLOPs) it is
achieved bandwidth over W.

Achieved FLOP/s above the dtype's peak cannot happen: it means the shapes, the dtype (e.g.
FP8 work counted against the BF16 peak) or the peak table is wrong. PLAUSIBLE_TOLERANCE
allows for timer granularity on short kernels before such a point is flagged. Achieved
bandwidth (compulsory bytes over time) above W by more than the same tolerance is flagged
too: either the data was served from L2 cache (inputs a previous operation left there, or
small enough to be re-read from it), or the recorded shapes overstate the bytes moved.

The roof an operation sits under (its `bound`) is where it would be limited if it ran well,
not a diagnosis: below NEAR_ROOF_PCT of that roof it is far from both roofs (launch latency,
occupancy or tail effects hold it back; Nsight Compute's speed-of-light guidance calls a
kernel under 60% of both the compute and the memory peak latency-bound), whichever roof it
sits under. regime() words it that way.

The peak figures of each GPU that ran kernels: by its name in the built-in table or the
--gpu-peaks file; when the trace names no GPU, a representative GPU of the architecture the
kernel names require, labelled assumed (resolve() above). Shared by compute_efficiency and
model_utilization; a bad --gpu-peaks file is a one-line usage error, raised by the CLI
before any work."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import field, fields
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.devices import described
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.compute.arch import REPRESENTATIVE, ArchInference, infer_from_kernels
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject
from nsys_llm_explainer.options import read_json_file

DATA_FILE = "data/gpu_specs.json"
# Peak columns per dtype class; "fp64" prefers the Tensor Core figure where there is one.
PEAK_FIELDS = {
    "fp64": ("fp64_tensor_tflops", "fp64_tflops"),
    "fp32": ("fp32_tflops",),
    "tf32": ("tf32_tflops",),
    "bf16": ("bf16_tflops",),
    "fp16": ("fp16_tflops",),
    "fp8": ("fp8_tflops",),
    "int8": ("int8_tops",),
}
DTYPE_CLASSES = tuple(PEAK_FIELDS)
ARCH_FAMILIES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "")
MAX_ENTRIES = 500
MAX_PEAK = 1e6  # TFLOPS or GB/s: a thousand times today's largest GPU; above is a typo
_NUMBER_FIELDS = (
    "fp64_tflops",
    "fp64_tensor_tflops",
    "fp32_tflops",
    "tf32_tflops",
    "bf16_tflops",
    "fp16_tflops",
    "fp8_tflops",
    "int8_tops",
    "hbm_gbps",
    "host_link_gbps",
)
_ENTRY_KEYS = frozenset({"names", "model", "arch", "source", *_NUMBER_FIELDS})


@frozen
class GpuSpec:
    model: str
    tf32_tflops: float | None
    bf16_tflops: float | None
    fp8_tflops: float | None
    hbm_gbps: float
    host_link_gbps: float | None
    source: str
    fp64_tflops: float | None = None
    fp64_tensor_tflops: float | None = None
    fp32_tflops: float | None = None
    fp16_tflops: float | None = None
    int8_tops: float | None = None
    arch: str = ""

    def peak_tflops(self, dtype: str) -> float | None:
        """Dense peak for a dtype class (see DTYPE_CLASSES), or None when there is none."""
        for name in PEAK_FIELDS.get(dtype, ()):
            value = getattr(self, name)
            if value:
                return float(value)
        return None

    def peaks(self) -> dict[str, float | None]:
        return {d: self.peak_tflops(d) for d in DTYPE_CLASSES}


def _number(value: Any, where: str, required: bool) -> float | None:
    if value is None and not required:
        return None
    # bool is an int in Python; true/false in a peak table is a mistake, not 1 or 0.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{where} must be a positive number{'' if required else ' or null'}")
    if not math.isfinite(value) or value <= 0 or value > MAX_PEAK:
        raise UsageError(f"{where} must be a positive number no larger than {MAX_PEAK:g}")
    return float(value)


def _entry(item: Any, n: int, source: str) -> tuple[tuple[str, ...], GpuSpec]:
    where = f"{source}: gpus[{n}]"
    if not isinstance(item, dict):
        raise UsageError(f"{where} must be an object with names, hbm_gbps and peak figures")
    unknown = sorted(set(item) - _ENTRY_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    names = item.get("names")
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(x, str) and x.strip() and len(x) <= 200 for x in names)
    ):
        raise UsageError(f"{where}: names must be a non-empty list of device names")
    values = {
        f: _number(item.get(f), f"{where}.{f}", required=f == "hbm_gbps") for f in _NUMBER_FIELDS
    }
    model, arch = item.get("model", names[0]), item.get("arch", "")
    src = item.get("source", source)
    if not isinstance(model, str) or not isinstance(src, str):
        raise UsageError(f"{where}: model and source must be strings")
    if arch not in ARCH_FAMILIES:
        raise UsageError(f"{where}: arch must be one of {', '.join(a for a in ARCH_FAMILIES if a)}")
    hbm = values.pop("hbm_gbps")
    assert hbm is not None  # required above
    spec = GpuSpec(model=model, source=src, arch=arch, hbm_gbps=hbm, **values)
    return tuple(x.strip() for x in names), spec


def parse_table(obj: Any, source: str) -> dict[str, GpuSpec]:
    """Device name -> spec from a decoded peak-table document; UsageError (one line) if bad."""
    if not isinstance(obj, dict) or not isinstance(obj.get("gpus"), list):
        raise UsageError(f'{source}: expected a JSON object {{"gpus": [...]}}')
    unknown = sorted(set(obj) - {"gpus", "comment"})
    if unknown:
        raise UsageError(f"{source}: unknown key(s) {', '.join(map(repr, unknown))}")
    items = obj["gpus"]
    if not items or len(items) > MAX_ENTRIES:
        raise UsageError(f"{source}: gpus must hold 1 to {MAX_ENTRIES} entries")
    table: dict[str, GpuSpec] = {}
    for n, item in enumerate(items):
        names, spec = _entry(item, n, source)
        for name in names:
            if name in table:
                raise UsageError(f"{source}: device name {name!r} appears twice")
            table[name] = spec
    return table


@functools.cache
def builtin_table() -> dict[str, GpuSpec]:
    text = resources.files("nsys_llm_explainer").joinpath(DATA_FILE).read_text(encoding="utf-8")
    return parse_table(json.loads(text), DATA_FILE)


BY_NAME: dict[str, GpuSpec] = builtin_table()
SPEC_FIELDS = tuple(f.name for f in fields(GpuSpec))


def lookup(name: str | None, table: dict[str, GpuSpec] | None = None) -> GpuSpec | None:
    """The spec for an exact CUDA device name (surrounding spaces ignored), or None."""
    return (BY_NAME if table is None else table).get(name.strip()) if name else None


def ridge_points(spec: GpuSpec) -> dict[str, float | None]:
    """Arithmetic intensity (FLOP/byte) where peak compute meets peak memory bandwidth."""

    def ridge(tflops: float | None) -> float | None:
        return round(tflops * 1e12 / (spec.hbm_gbps * 1e9), 1) if tflops else None

    return {
        "tf32": ridge(spec.tf32_tflops),
        "bf16": ridge(spec.bf16_tflops),
        "fp8": ridge(spec.fp8_tflops),
    }


MAX_FILE_BYTES = 1 << 20
ANY_DEVICE = "*"


@frozen
class PeakTable:
    by_name: dict[str, GpuSpec]
    source: str  # "built-in" or "built-in, with N entries from FILE"
    user_names: frozenset[str] = frozenset()


def builtin() -> PeakTable:
    return PeakTable(dict(BY_NAME), "built-in")


def load_gpu_peaks(path: str | Path | None) -> PeakTable:
    """The built-in table, overridden and extended by the entries of `path` (--gpu-peaks)."""
    if path is None:
        return builtin()
    p = Path(path)
    obj = read_json_file(p, "GPU peak file", MAX_FILE_BYTES)
    user = parse_table(obj, p.name)
    merged = {**BY_NAME, **user}
    return PeakTable(merged, f"built-in, with {len(user)} names from {p.name}", frozenset(user))


@frozen
class ResolvedPeaks:
    spec: GpuSpec | None
    basis: Literal["table", "user file", "assumed", "unknown"]
    note: str  # one sentence for the report
    arch: ArchInference | None = None

    @property
    def assumed(self) -> bool:
        return self.basis == "assumed"


def resolve(
    device_name: str | None,
    table: PeakTable | None = None,
    kernel_names: Iterable[str] = (),
) -> ResolvedPeaks:
    """Peaks for a device: by exact name; else, from kernel names, a representative GPU of
    the inferred family (assumed); else unknown, with the reason."""
    t = table or builtin()
    spec = lookup(device_name, t.by_name)
    if spec is not None and device_name is not None:
        user = device_name.strip() in t.user_names
        return ResolvedPeaks(
            spec,
            "user file" if user else "table",
            f"{spec.model}: {'figures from the --gpu-peaks file' if user else spec.source}",
        )
    fallback = t.by_name.get(ANY_DEVICE) if ANY_DEVICE in t.user_names else None
    if fallback is not None:
        what = repr(device_name) if device_name else "this export's GPU"
        return ResolvedPeaks(
            fallback, "user file", f"{what}: the '*' entry of the --gpu-peaks file"
        )
    if device_name:
        return ResolvedPeaks(
            None, "unknown", f"no peak figures for {device_name!r}: add it with --gpu-peaks"
        )
    arch = infer_from_kernels(kernel_names)
    if arch is None:
        return ResolvedPeaks(
            None, "unknown", "the export names no GPU and no kernel name shows its architecture"
        )
    rep = lookup(REPRESENTATIVE[arch.family], t.by_name)
    if rep is None:
        return ResolvedPeaks(None, "unknown", f"{arch.note}; no representative GPU", arch)
    note = (
        f"assumed: peaks of {rep.model}, a representative {arch.family} GPU ({arch.note}); "
        "name the GPU with --gpu-peaks for real figures"
    )
    return ResolvedPeaks(rep, "assumed", note, arch)


PLAUSIBLE_TOLERANCE = 0.10  # 10% over peak: more than clock or timer error can explain
NEAR_ROOF_PCT = 60.0  # at least this share of its roof: limited by that roof
Bound = Literal["compute", "memory"]


@frozen
class Roof:
    dtype: str  # peak class ("bf16")
    peak_flops: float  # FLOP/s
    peak_bandwidth: float  # bytes/s

    @property
    def ridge(self) -> float:
        return ridge_point(self.peak_flops, self.peak_bandwidth)

    def attainable(self, intensity: float) -> float:
        return attainable_flops(intensity, self.peak_flops, self.peak_bandwidth)


def ridge_point(peak_flops: float, peak_bandwidth: float) -> float:
    """FLOP per byte where the compute roof meets the bandwidth roof."""
    if peak_flops <= 0 or peak_bandwidth <= 0:
        raise ValueError("peaks must be positive")
    return peak_flops / peak_bandwidth


def attainable_flops(intensity: float, peak_flops: float, peak_bandwidth: float) -> float:
    """The roof at an arithmetic intensity: min(peak, intensity x bandwidth)."""
    if intensity < 0:
        raise ValueError("intensity must be non-negative")
    return min(peak_flops, intensity * peak_bandwidth)


def classify(intensity: float, ridge: float) -> Bound:
    return "compute" if intensity >= ridge else "memory"


def roofs(spec: GpuSpec, dtypes: tuple[str, ...] = DTYPE_CLASSES) -> dict[str, Roof]:
    """One roof per dtype class the GPU has a peak for."""
    out = {}
    for d in dtypes:
        tflops = spec.peak_tflops(d)
        if tflops:
            out[d] = Roof(d, tflops * 1e12, spec.hbm_gbps * 1e9)
    return out


def check_plausible(
    achieved_flops: float, peak_flops: float, tolerance: float = PLAUSIBLE_TOLERANCE
) -> str | None:
    """A message when achieved FLOP/s exceeds the peak by more than `tolerance`, else None."""
    if peak_flops > 0 and achieved_flops > peak_flops * (1 + tolerance):
        return (
            f"achieved {achieved_flops / 1e12:,.1f} TFLOP/s is {achieved_flops / peak_flops:.2f}x "
            f"the {peak_flops / 1e12:,.1f} TFLOP/s peak: the shapes, the dtype or the peak "
            "figure is wrong"
        )
    return None


def check_bandwidth(
    achieved_bandwidth: float, peak_bandwidth: float, tolerance: float = PLAUSIBLE_TOLERANCE
) -> str | None:
    """A message when achieved bandwidth exceeds the memory peak by more than `tolerance`."""
    if peak_bandwidth > 0 and achieved_bandwidth > peak_bandwidth * (1 + tolerance):
        return (
            f"achieved {achieved_bandwidth / 1e9:,.0f} GB/s is "
            f"{achieved_bandwidth / peak_bandwidth:.2f}x the {peak_bandwidth / 1e9:,.0f} GB/s "
            "memory peak: the data came from L2 cache, or the shapes overstate the bytes"
        )
    return None


@frozen
class Placement:
    """Where one operation (or kernel, or group of them) sits under a roof."""

    label: str
    dtype: str
    flops: float
    bytes: float
    time_s: float
    intensity: float  # FLOP/byte
    achieved_flops: float  # FLOP/s
    achieved_bandwidth: float  # bytes/s
    attainable: float  # FLOP/s the roof allows at this intensity
    bound: Bound
    efficiency: float  # achieved / attainable (bandwidth share for bytes-only work)
    implausible: str | None  # set when achieved FLOP/s exceeds the peak (check_plausible)
    above_bandwidth: bool  # achieved bandwidth above the memory peak x (1 + tolerance)


def place(
    label: str,
    flops: float,
    nbytes: float,
    time_s: float,
    roof: Roof,
    tolerance: float = PLAUSIBLE_TOLERANCE,
) -> Placement:
    if time_s <= 0:
        raise ValueError("time must be positive")
    if flops < 0 or nbytes < 0 or (flops == 0 and nbytes == 0):
        raise ValueError("flops and bytes must be non-negative and not both zero")
    intensity = flops / nbytes if nbytes else float("inf")
    achieved, bandwidth = flops / time_s, nbytes / time_s
    roof_here = roof.attainable(intensity) if nbytes else roof.peak_flops
    if flops == 0:
        efficiency = bandwidth / roof.peak_bandwidth
    else:
        efficiency = achieved / roof_here
    return Placement(
        label=label,
        dtype=roof.dtype,
        flops=flops,
        bytes=nbytes,
        time_s=time_s,
        intensity=intensity,
        achieved_flops=achieved,
        achieved_bandwidth=bandwidth,
        attainable=roof_here,
        bound=classify(intensity, roof.ridge),
        efficiency=efficiency,
        implausible=check_plausible(achieved, roof.peak_flops, tolerance),
        above_bandwidth=check_bandwidth(bandwidth, roof.peak_bandwidth, tolerance) is not None,
    )


@frozen
class Placements:
    """`place` over arrays (one entry per operation); NaN where the peak or time is unknown."""

    intensity: np.ndarray  # FLOP/byte (inf for FLOPs without bytes)
    achieved_flops: np.ndarray  # FLOP/s
    achieved_bandwidth: np.ndarray  # bytes/s
    attainable: np.ndarray  # FLOP/s the roof allows at this intensity
    compute_bound: np.ndarray  # bool: intensity at or beyond the ridge point
    efficiency: np.ndarray  # achieved / attainable; bandwidth share for bytes-only work
    implausible: np.ndarray  # bool: achieved FLOP/s above peak x (1 + tolerance)
    above_bandwidth: np.ndarray  # bool: achieved bandwidth above the memory peak x (1 + tolerance)


def place_many(
    flops: np.ndarray,
    nbytes: np.ndarray,
    time_s: np.ndarray,
    peak_flops: np.ndarray,
    peak_bandwidth: np.ndarray,
    tolerance: float = PLAUSIBLE_TOLERANCE,
) -> Placements:
    """The same arithmetic as `place`, vectorized; a zero time or peak gives NaN, not an error."""
    f, b, t = (np.asarray(x, dtype=np.float64) for x in (flops, nbytes, time_s))
    p, w = (np.asarray(x, dtype=np.float64) for x in (peak_flops, peak_bandwidth))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(t > 0, t, np.nan)
        p = np.where(p > 0, p, np.nan)
        w = np.where(w > 0, w, np.nan)
        intensity = np.where(b > 0, f / np.where(b > 0, b, 1.0), np.where(f > 0, np.inf, np.nan))
        achieved, bandwidth = f / t, b / t
        roof = np.where(b > 0, np.minimum(p, intensity * w), p)
        efficiency = np.where(f > 0, achieved / roof, bandwidth / w)
        ridge = p / w
        return Placements(
            intensity=intensity,
            achieved_flops=achieved,
            achieved_bandwidth=bandwidth,
            attainable=roof,
            compute_bound=intensity >= ridge,
            efficiency=efficiency,
            implausible=achieved > p * (1 + tolerance),
            above_bandwidth=bandwidth > w * (1 + tolerance),
        )


def regime(bound: str | None, pct_of_roof: float | None) -> str:
    """The roof an operation sits under, in words that do not overstate it: "memory" or
    "compute" when it reaches NEAR_ROOF_PCT of that roof, else "far from every roof (under the
    memory roof)"; "n/a" when it was not placed."""
    if not bound:
        return "n/a"
    if pct_of_roof is None or pct_of_roof >= NEAR_ROOF_PCT:
        return str(bound)
    return f"far from every roof (under the {bound} roof)"


@lru_cache(maxsize=8)
def peak_table(path: str | None) -> PeakTable:
    return load_gpu_peaks(path)


@frozen
class DevicePeaks:
    devices: list[int]  # devices that ran kernels, ascending
    resolved: dict[int, ResolvedPeaks]
    names: dict[int, str | None]  # device -> the name the trace gives it
    table_source: str
    notes: list[str] = field(default_factory=list)

    def spec(self, device: int) -> GpuSpec | None:
        r = self.resolved.get(device)
        return r.spec if r else None

    def peak_flops(self, device: int, dtype_class: str | None) -> float:
        """FLOP/s of a dtype class on a device, NaN when unknown."""
        spec = self.spec(device)
        value = spec.peak_tflops(dtype_class) if spec and dtype_class else None
        return value * 1e12 if value else float("nan")

    def bandwidth(self, device: int) -> float:
        spec = self.spec(device)
        return spec.hbm_gbps * 1e9 if spec else float("nan")

    def roofs(self, device: int, classes: list[str]) -> list[Roof]:
        spec = self.spec(device)
        wanted = tuple(c for c in DTYPE_CLASSES if c in classes)
        return list(roofs(spec, wanted).values()) if spec else []

    def describe(self, device: int) -> JsonObject:
        r = self.resolved[device]
        spec = r.spec
        return {
            "device_id": device,
            "gpu": self.names.get(device),
            "model": spec.model if spec else None,
            "peaks_basis": r.basis,
            "peaks_note": r.note,
            "arch_evidence": list(r.arch.evidence) if r.arch else [],
            "peak_tflops": {d: spec.peak_tflops(d) for d in DTYPE_CLASSES} if spec else {},
            "hbm_gbps": spec.hbm_gbps if spec else None,
            "ridge_flop_per_byte": {
                d: round(spec.peak_tflops(d) * 1e3 / spec.hbm_gbps, 1)  # type: ignore[operator]
                for d in DTYPE_CLASSES
                if spec and spec.peak_tflops(d)
            },
        }


def device_peaks(ctx: Context) -> DevicePeaks:
    """Peaks per device that ran kernels (cached per --gpu-peaks file)."""
    path = ctx.options.gpu_peaks

    def build() -> DevicePeaks:
        table = peak_table(path)
        k = ctx.data.kernels()
        devices = sorted(int(d) for d in distinct_few(k.device).tolist())
        names: dict[int, str | None] = {g.device_id: g.name for g in described(ctx.data)[0]}
        kernel_names: list[str] = []
        if any(not names.get(d) for d in devices):
            uniq = np.unique(k.name_id)
            kernel_names = list(ctx.data.kernel_names(uniq).values())
        resolved = {
            d: resolve(names.get(d) or None, table, kernel_names if not names.get(d) else ())
            for d in devices
        }
        notes = sorted({r.note for r in resolved.values() if r.basis in ("assumed", "unknown")})
        return DevicePeaks(devices, resolved, {d: names.get(d) for d in devices}, table.source, notes)

    return ctx.data.cached(f"compute_peaks:{path}", build)
