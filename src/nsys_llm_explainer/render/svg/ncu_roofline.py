"""The roofline of Nsight Compute's measured launches (ncu.json's or metrics.ncu's launch
objects): one point per launch with a roofline point (FLOPs of its dominant precision,
DRAM bytes, duration), under the roofs those launches were placed against (the roofline
section's peaks or the peak table's).

Launches of different GPUs do not share a plot: the GPU (by name, else compute
capability) with the most measured time is drawn, and the summary counts the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from nsys_llm_explainer.compute.peaks import Roof
from nsys_llm_explainer.render.svg.base import Plot, PlotInput
from nsys_llm_explainer.render.svg.roofline import RooflinePoint, build_roofline

PLOT_ID = "ncu_roofline"
TITLE = "Nsight Compute roofline"


def _gpu(launch: dict[str, Any]) -> str:
    if launch.get("device_name"):
        return str(launch["device_name"])
    return f"compute capability {launch['cc']}" if launch.get("cc") else "an unnamed GPU"


def _dtype(point: dict[str, Any]) -> str:
    return point["precision"] if point["tensor"] or point["precision"] != "fp16" else "fp16 (CUDA cores)"


def build_ncu(launches: Sequence[dict[str, Any]], label: Callable[[str], str]) -> Plot | None:
    placed = [x for x in launches if x.get("roofline") and x.get("duration_ns") and x.get("dram_bytes")]
    if not placed:
        return None
    time_by_gpu: dict[str, float] = {}
    for launch in placed:
        time_by_gpu[_gpu(launch)] = time_by_gpu.get(_gpu(launch), 0.0) + float(launch["duration_ns"])
    gpu = max(time_by_gpu, key=lambda g: time_by_gpu[g])
    mine = [launch for launch in placed if _gpu(launch) == gpu]
    roofs: dict[str, Roof] = {}
    for launch in mine:
        p, own = launch["roofline"], launch.get("section_peaks") or {}
        if p.get("peak_tflops") and p.get("bandwidth_gbps"):
            peak, bw = float(p["peak_tflops"]) * 1e12, float(p["bandwidth_gbps"]) * 1e9
            roofs.setdefault(_dtype(p), Roof(_dtype(p), peak, bw))
        for prec, tflops in (own.get("tflops") or {}).items():
            if tflops and own.get("dram_gbps"):
                roofs.setdefault(prec if prec != "fp16" else "fp16 (CUDA cores)",
                                 Roof(prec if prec != "fp16" else "fp16 (CUDA cores)", float(tflops) * 1e12,
                                      float(own["dram_gbps"]) * 1e9))
    points = [
        RooflinePoint(f"#{launch['index']} {label(launch['kernel'])}", _dtype(launch["roofline"]),
                      float(launch["roofline"]["flops"]), float(launch["dram_bytes"]), float(launch["duration_ns"]))
        for launch in mine
    ]
    no_roof = sorted({p.dtype for p in points} - set(roofs))
    others = len(time_by_gpu) - 1
    plot = build_roofline(list(roofs.values()), points, gpu, plot_id=PLOT_ID, title=TITLE, noun=("launch", "launches"))
    if plot is None:
        return None
    extra = ""
    if no_roof:
        extra += f" No {', '.join(d.upper() for d in no_roof)} peak is known: those points (grey) have no roof."
    if others:
        extra += f" Launches on {others} other GPU{'s' if others > 1 else ''} are not drawn."
    return replace(plot, summary=plot.summary + extra) if extra else plot


def build(inp: PlotInput) -> Plot | None:
    """The report's plot of the ncu metric (--ncu): the launches matched to the trace's
    kernels, else all of them."""
    m = inp.metric("ncu")
    if m is None:
        return None
    matched = [x for x in m["launches"] if x.get("matched_kernel")]  # the trace's GPU, most likely
    return build_ncu(matched or m["launches"], inp.labels)
