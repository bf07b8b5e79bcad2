"""Kernel time as bars: the top kernels (build_top_kernels) and the time per process
(build_per_process, below).

Top kernels by total time: horizontal bars, coloured by kernel category when the
categories metric ran (its kernel_category_names table maps each name to a category).
Rows of metrics.top_kernels are per (name, device); the plot sums a name over devices, from
the full table (report.json may hold only the first rows). Bars are labelled with the
report's kernel labels (kernels/labels.py), the full name in the tooltip and the data table."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

import pandas as pd

from nsys_llm_explainer.fmt import dur, num, pct
from nsys_llm_explainer.render.json_writer import ok
from nsys_llm_explainer.render.svg.base import COLOURS, Bar, Plot, PlotInput, hbars, legend

if TYPE_CHECKING:
    from nsys_llm_explainer.render.report_types import TopKernelsSection

TOP = 15
# The label column holds LABEL_MAX characters of the widest glyph mix seen in kernel names
# (about 7.8 px each at 12 px): labels are never shortened again, nor clipped.
LABEL_W, BAR_W, VALUE_W = 520, 380, 150
OTHER_CLASS = f"k{COLOURS - 1}"


def category_classes(inp: PlotInput) -> tuple[dict[str, str], dict[str, str]]:
    """name -> category, and category -> colour class (largest categories first; other grey)."""
    names = inp.frame("categories", "kernel_category_names")
    cats = ok(inp.metrics.get("categories"))
    if names is None or cats is None:
        return {}, {}
    order = [c["category"] for c in cats.get("categories", []) if c["category"] != "other"]
    classes = {c: f"k{i}" for i, c in enumerate(order[: COLOURS - 1])}
    return dict(zip(names["name"].astype(str), names["category"].astype(str), strict=True)), classes


class NameRow(TypedDict):
    """One kernel name over all devices (numbers as pandas sums them)."""

    name: str
    calls: int
    total_ns: int
    devices: list[int]
    pct: float  # of the kernel time


def by_name(tk: TopKernelsSection, table: pd.DataFrame | None = None) -> list[NameRow]:
    """The TOP names by total time over all devices, with their devices (from `table`, the
    kernels CSV rows, when given; else from report.json's list)."""
    columns = ["name", "device_id", "calls", "total_ns"]
    frame = table[columns] if table is not None else pd.DataFrame(tk["kernels"], columns=columns)
    grouped = frame.groupby("name", sort=False).agg(
        calls=("calls", "sum"),
        total_ns=("total_ns", "sum"),
        devices=("device_id", lambda d: sorted(int(x) for x in d)),
    )
    grouped = grouped.reset_index().sort_values(
        ["total_ns", "name"], ascending=[False, True], kind="stable"
    )
    total = tk["total_kernel_ns"]
    rows: list[NameRow] = grouped.head(TOP).to_dict("records")
    for r in rows:
        r["pct"] = 100.0 * r["total_ns"] / total if total else 0.0
    return rows


def build_top_kernels(inp: PlotInput) -> Plot | None:
    tk = ok(inp.metrics.get("top_kernels"))
    if tk is None or not tk["kernels"]:
        return None
    rows = by_name(tk, inp.frame("top_kernels", "kernels"))
    category, classes = category_classes(inp)
    label = inp.labels
    bars = []
    for r in rows:
        cat = category.get(r["name"])
        gpus = ", ".join(str(d) for d in r["devices"])
        tip = f"{r['name']}: {dur(r['total_ns'])} in {num(r['calls'])} calls on GPU {gpus}"
        cls = classes.get(cat or "", OTHER_CLASS) if category else "busy"
        bars.append(
            Bar(
                label(r["name"]),
                float(r["total_ns"]),
                f"{dur(r['total_ns'])} · {pct(r['pct'])}",
                cls,
                tip + (f" ({cat})" if cat else ""),
                full=r["name"],
            )
        )
    body, h = hbars(bars, 8, LABEL_W, BAR_W)
    height = 8 + h + 8
    if category:
        used = list(dict.fromkeys(category.get(r["name"], "other") for r in rows))
        leg, leg_h = legend(
            LABEL_W, height, [(classes.get(c, OTHER_CLASS), c) for c in used], BAR_W + VALUE_W
        )
        body += leg
        height += leg_h
    shown = sum(r["total_ns"] for r in rows)
    summary = (
        f"The {len(rows)} kernels with the most GPU time (summed over devices) "
        f"take {dur(shown)} of "
        f"{dur(tk['total_kernel_ns'])} kernel time; the first is {label(rows[0]['name'])} "
        f"with {pct(rows[0]['pct'])}."
    )
    headers = ("Kernel", "Devices", "Calls", "Total", "Share", "Category")
    table = tuple(
        (
            label(r["name"]),
            " ".join(str(d) for d in r["devices"]),
            num(r["calls"]),
            dur(r["total_ns"]),
            pct(r["pct"]),
            category.get(r["name"], "n/a"),
        )
        for r in rows
    )
    return Plot(
        "top_kernels",
        "Top kernels by GPU time",
        summary,
        LABEL_W + BAR_W + VALUE_W,
        int(height + 6),
        body,
        headers,
        table,
        tuple(str(r["name"]) for r in rows),
    )


# Kernel time per process: one bar per pid (metrics.per_process).
PER_PROCESS_TOP = 12
PER_PROCESS_LABEL_W, PER_PROCESS_BAR_W, PER_PROCESS_VALUE_W = 160, 600, 170


def build_per_process(inp: PlotInput) -> Plot | None:
    pp = ok(inp.metrics.get("per_process"))
    if pp is None or not pp["processes"]:
        return None
    rows = pp["processes"][:PER_PROCESS_TOP]
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
    body, h = hbars(bars, 8, PER_PROCESS_LABEL_W, PER_PROCESS_BAR_W)
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
        PER_PROCESS_LABEL_W + PER_PROCESS_BAR_W + PER_PROCESS_VALUE_W,
        int(h + 22),
        body,
        headers,
        table,
    )
