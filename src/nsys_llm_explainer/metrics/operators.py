"""operators: the PyTorch operator view (only PyTorch profiler traces record operators).

Per operator name (aten::* and user ops): calls; CPU time inclusive and self (minus child
operators); GPU kernel time of the kernels it launched itself (innermost operator, see
operators.py) and inclusive of nested operators; kernels and launch calls per call;
launch overhead per call (CPU time in launch calls) and the mean launch-to-kernel-start
delay (launch queueing). With record_shapes, each operator's input shapes and types, per
distinct shape. Also per ProfilerStep#N step, per phase (phase map), and for the top
operators the Python call sites (with_stack) that called them.
"""

from __future__ import annotations

import dataclasses
from typing import TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import operators as extra
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.groups import group_codes, group_sum
from nsys_llm_explainer.analysis.operators import OperatorAttribution, inclusive_per_name, operator_attribution
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table

COLUMNS = (
    "name", "calls", "cpu_inclusive_ns", "cpu_self_ns", "kernel_ns", "kernel_inclusive_ns",
    "kernel_count", "kernels_per_call", "launches", "launches_per_call", "launch_api_ns",
    "launch_overhead_per_call_ns", "launch_queue_avg_ns", "pct_of_kernel_time", "shapes",
)
KERNEL_COLUMNS = ("operator", "kernel", "kernel_count", "kernel_ns", "pct_of_operator_kernel_ns")
SHAPE_COLUMNS = ("operator", "input_dims", "input_types", "calls", "cpu_inclusive_ns", "kernel_ns")
LISTED = 100  # operators in report.json (the CSV keeps all)
LISTED_PAIRS = 200  # operator -> kernel rows in report.json
SHAPES_PER_OPERATOR = 5  # in report.json; operator_shapes.csv keeps all
NO_OPERATOR = "(no operator)"


class OperatorTotals(TypedDict):
    """The operator counts and kernel-time coverage (the head of report.json `metrics.operators`)."""

    operator_count: int
    distinct_operators: int
    total_kernel_ns: int
    attributed_kernel_ns: int
    coverage: float
    kernels_via_external_id: int
    kernels_without_operator: int
    shapes_recorded: bool


def _per_name(ctx: Context) -> tuple[pd.DataFrame, OperatorTotals, OperatorAttribution, np.ndarray]:
    data = ctx.data
    att = operator_attribution(data)
    ops, k = att.ops, data.kernels()
    all_names = data.operator_names()
    codes, (name_ids,) = group_codes(ops.name)
    g = len(name_ids)
    kop = att.kernel_op
    kcode = np.where(kop >= 0, codes[np.maximum(kop, 0)], -1)
    hit = kcode >= 0
    own_kernel = group_sum(k.dur[hit], kop[hit], len(ops))  # per operator row
    kernel_ns = group_sum(k.dur[hit], kcode[hit], g)
    kernel_count = np.bincount(kcode[hit], minlength=g)
    ccode = np.where(att.call_op >= 0, codes[np.maximum(att.call_op, 0)], -1)
    chit = ccode >= 0
    launches = np.bincount(ccode[chit], minlength=g)
    launch_api_ns = np.zeros(g, dtype=np.int64)
    queue_sum = np.zeros(g, dtype=np.int64)
    queue_n = np.zeros(g, dtype=np.int64)
    if len(att.calls):
        rt = data.runtime()
        rows = att.calls[chit]
        launch_api_ns = group_sum(rt.end[rows] - rt.start[rows], ccode[chit], g)
        first = extra.first_kernel_per_call(att.launch_call, k.start)
        with_k = hit & first
        qcode = kcode[with_k]
        queue_sum = group_sum(k.start[with_k] - rt.start[att.launch_call[with_k]], qcode, g)
        queue_n = np.bincount(qcode, minlength=g)
    calls = np.bincount(codes, minlength=g)
    total = int(k.dur.sum())
    # inclusive_per_name indexes names by code: pass codes as the names of the rows
    coded = dataclasses.replace(att, ops=ops.with_columns(name=codes))
    frame = pd.DataFrame({
        "name": [all_names[int(i)] for i in name_ids],
        "calls": calls,
        "cpu_inclusive_ns": group_sum(ops.end - ops.start, codes, g),
        "cpu_self_ns": group_sum(att.self_ns, codes, g),
        "kernel_ns": kernel_ns,
        "kernel_inclusive_ns": inclusive_per_name(coded, own_kernel, g),
        "kernel_count": kernel_count,
        "kernels_per_call": np.round(kernel_count / np.maximum(calls, 1), 3),
        "launches": launches,
        "launches_per_call": np.round(launches / np.maximum(calls, 1), 3),
        "launch_api_ns": launch_api_ns,
        "launch_overhead_per_call_ns": np.rint(launch_api_ns / np.maximum(calls, 1)).astype(np.int64),
        "launch_queue_avg_ns": pd.array(
            [int(round(s / n)) if n else None for s, n in zip(queue_sum.tolist(), queue_n.tolist(), strict=True)],
            dtype="Int64",
        ),
        "pct_of_kernel_time": np.round(100.0 * kernel_ns / total, 2) if total else 0.0,
        "shapes": extra.distinct_shapes(ops.shape, codes, g),
    })
    frame["code"] = np.arange(g)
    frame = frame.sort_values(["kernel_ns", "kernel_inclusive_ns", "cpu_inclusive_ns", "name"],
                              ascending=[False, False, False, True], kind="stable").reset_index(drop=True)
    attributed = int(k.dur[hit].sum())
    totals: OperatorTotals = {
        "operator_count": int(len(ops)),
        "distinct_operators": int(g),
        "total_kernel_ns": total,
        "attributed_kernel_ns": attributed,
        "coverage": round(attributed / total, 4) if total else 0.0,
        "kernels_via_external_id": int(att.kernel_via_ext.sum()),
        "kernels_without_operator": int((~hit).sum()),
        "shapes_recorded": bool((ops.shape >= 0).any()),
    }
    return frame, totals, att, codes


def run(ctx: Context) -> Outcome:
    ops = ctx.data.operators()  # Unavailable on formats without operators -> Skipped
    if len(ops) == 0:
        return METRIC.skipped("the trace has no operator events")
    frame, totals, att, codes = _per_name(ctx)
    pairs = extra.operator_kernels(ctx.data, att, frame)
    shapes = extra.shape_table(ctx.data, att, codes, frame)
    records = frame.drop(columns=["code"]).head(LISTED)
    by_operator = extra.shapes_by_operator(shapes, SHAPES_PER_OPERATOR)
    listed = []
    for rec in records.to_dict("records"):
        rec["launch_queue_avg_ns"] = None if pd.isna(rec["launch_queue_avg_ns"]) else int(rec["launch_queue_avg_ns"])
        rec["top_shapes"] = by_operator.get(rec["name"], [])
        listed.append(rec)
    notes: list[str] = []
    if not totals["shapes_recorded"]:
        notes.append("input shapes were not recorded (profile with record_shapes=True)")
    steps = extra.per_step(ctx.data, att, codes, frame)
    phases = extra.per_phase(ctx, att, frame)
    call_sites, why_not = extra.call_sites(ctx.data, att, codes, frame)
    if why_not:
        notes.append(f"Python call sites are not shown, because {why_not}")
    data = {
        **totals,
        "attribution": "innermost operator enclosing the launch call (correlation id); "
                       "External id when the kernel has no launch call",
        "operators": listed,
        "operator_kernels": pairs.head(LISTED_PAIRS).to_dict("records"),
        "steps": steps,
        "phases": phases,
        "call_sites": call_sites,
    }
    tables = (
        Table("operators", COLUMNS, frame),
        Table("operator_kernels", KERNEL_COLUMNS, pairs),
        Table("operator_shapes", SHAPE_COLUMNS, shapes),
    )
    return MetricResult(METRIC.id, data, tables, tuple(notes))


METRIC = Metric(
    id="operators",
    # PyTorch profiler traces only (Skipped elsewhere)
    order=250,
    title="PyTorch operators",
    run=run,
    tables={"operators": COLUMNS, "operator_kernels": KERNEL_COLUMNS, "operator_shapes": SHAPE_COLUMNS},
    description=(
        "PyTorch operators (PyTorch profiler traces only): calls, CPU time inclusive/self, GPU kernel "
        "time of the innermost operator, kernels and launches per call, launch overhead, input shapes, "
        "per step and phase, Python call sites."
    ),
    reads=("runtime", "kernel_launch_index", "operator_attribution"),
)
