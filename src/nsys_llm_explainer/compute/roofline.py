"""Roofline arithmetic: ridge points, attainable FLOP/s, bound classification, efficiency
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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from nsys_llm_explainer.compute.gpu_specs import DTYPE_CLASSES, GpuSpec

PLAUSIBLE_TOLERANCE = 0.10  # 10% over peak: more than clock or timer error can explain
NEAR_ROOF_PCT = 60.0  # at least this share of its roof: limited by that roof
Bound = Literal["compute", "memory"]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
