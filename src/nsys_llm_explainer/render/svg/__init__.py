"""Plots as hand-written SVG: one builder function per plot, each reading the Report, in
modules by topic (timeline, top_kernels, steps, roofline).

`build_plots(inp)` returns the plots that have data, and for the others the reason they
are not drawn (the writers show it, never an empty chart). Shared.plots (render/shared.py)
builds them once per report."""

from __future__ import annotations

import os
from collections.abc import Callable

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import Skipped
from nsys_llm_explainer.render.svg import roofline, steps, timeline, top_kernels
from nsys_llm_explainer.render.svg.base import Plot, PlotInput


@frozen
class PlotSpec:
    title: str
    metric_id: str  # the metric whose data the plot draws
    build: Callable[[PlotInput], Plot | None]


PLOTS: tuple[PlotSpec, ...] = (
    PlotSpec("GPU timeline", "timeline", timeline.build_timeline),
    PlotSpec("Top kernels by GPU time", "top_kernels", top_kernels.build_top_kernels),
    PlotSpec("Idle-gap sizes", "gpu_idle", timeline.build_gap_histogram),
    PlotSpec("Step latency", "steps", steps.build_steps),
    PlotSpec(steps.CRITICAL_PATH_TITLE, "critical_path", steps.build_critical_path),
    PlotSpec("Kernel time per process", "per_process", top_kernels.build_per_process),
    PlotSpec("Roofline", "compute_efficiency", roofline.build_compute_roofline),
    PlotSpec(roofline.NCU_TITLE, "ncu", roofline.build_ncu_roofline),
)


@frozen
class Missing:
    title: str
    reason: str


def _why_missing(inp: PlotInput, spec: PlotSpec) -> str:
    m = inp.report.metrics.get(spec.metric_id)
    if m is None:
        return f"the {spec.metric_id} metric did not run"
    if isinstance(m, Skipped):
        return f"{spec.metric_id} was not measured: {m.reason}"
    return f"{spec.metric_id} has nothing to draw on this trace"


def build_plots(inp: PlotInput) -> tuple[list[Plot], list[Missing]]:
    plots, missing = [], []
    for spec in PLOTS:
        try:
            plot = spec.build(inp)
        except Exception as exc:  # noqa: BLE001 - one plot's bug must not lose the report
            if os.environ.get("NSYS_LLM_EXPLAIN_DEBUG"):
                raise
            missing.append(
                Missing(
                    spec.title, f"it could not be drawn ({type(exc).__name__}); please report it"
                )
            )
            continue
        if plot is not None:
            plots.append(plot)
        else:
            missing.append(Missing(spec.title, _why_missing(inp, spec)))
    return plots, missing


def plot_files(plots: list[Plot]) -> dict[str, str]:
    """plots/<id>.svg for each plot: standalone SVG with its own light/dark stylesheet."""
    return {
        f"plots/{p.id}.svg": '<?xml version="1.0" encoding="UTF-8"?>\n'
        + p.svg(standalone=True)
        + "\n"
        for p in plots
    }


__all__ = ["PLOTS", "Missing", "Plot", "PlotInput", "build_plots", "plot_files"]
