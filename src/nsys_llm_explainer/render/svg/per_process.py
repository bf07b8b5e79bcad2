"""Kernel time per process: one bar per pid (metrics.per_process)."""

from __future__ import annotations

from nsys_llm_explainer.fmt import dur, num, pct
from nsys_llm_explainer.render.svg.base import Bar, Plot, PlotInput, hbars

TOP = 12
LABEL_W, BAR_W, VALUE_W = 160, 600, 170


def build(inp: PlotInput) -> Plot | None:
    pp = inp.metric("per_process")
    if pp is None or not pp["processes"]:
        return None
    rows = pp["processes"][:TOP]
    bars = [
        Bar(
            f"pid {p['pid']}",
            float(p["kernel_ns"]),
            f"{dur(p['kernel_ns'])} · {pct(p['pct_of_kernel_time'])}",
            tip=f"pid {p['pid']}: {dur(p['kernel_ns'])} in {num(p['kernel_count'])} kernels on GPU "
            + ", ".join(str(d) for d in p["devices"]),
        )
        for p in rows
    ]
    body, h = hbars(bars, 8, LABEL_W, BAR_W)
    summary = (
        f"{len(pp['processes'])} processes ran kernels; "
        + "; ".join(
            f"pid {p['pid']}: {dur(p['kernel_ns'])} ({pct(p['pct_of_kernel_time'])})" for p in rows
        )
        + "."
    )
    headers = ("Process", "Kernels", "Kernel time", "Share", "Devices")
    table = tuple(
        (
            f"pid {p['pid']}",
            num(p["kernel_count"]),
            dur(p["kernel_ns"]),
            pct(p["pct_of_kernel_time"]),
            " ".join(str(d) for d in p["devices"]),
        )
        for p in rows
    )
    return Plot(
        "per_process",
        "Kernel time per process",
        summary,
        LABEL_W + BAR_W + VALUE_W,
        int(h + 22),
        body,
        headers,
        table,
    )
