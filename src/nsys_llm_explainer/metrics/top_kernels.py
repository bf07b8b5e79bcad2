"""top_kernels: time per (kernel name, device), with percentiles and duration modes (a
kernel whose calls take two or more clearly different times, analysis/stats.py) from one
sort."""

from __future__ import annotations

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_codes
from nsys_llm_explainer.analysis.stats import KERNEL_COLUMNS, csv_frame, kernel_table
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.kernels import KernelRow, TopKernels


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    codes, (name_ids, devices) = group_codes(k.name_id, k.device)
    lookup = ctx.data.kernel_names(name_ids)
    names = [lookup.get(int(i), f"(unnamed kernel #{int(i)})") for i in name_ids]
    frame = kernel_table(names, devices, k.dur, codes)
    total_ns = int(frame["total_ns"].sum())
    result = TopKernels(
        name_mode=ctx.data.kernel_name_mode,
        total_kernel_ns=total_ns,
        kernel_count=int(len(k)),
        distinct_kernels=int(frame["name"].nunique()),
        devices=tuple(sorted(int(d) for d in distinct_few(k.device))),
        kernels=tuple(KernelRow.of(r) for r in frame.to_dict("records")),
    )
    tables = (Table("kernels", KERNEL_COLUMNS, csv_frame(frame)),)
    return MetricResult(METRIC.id, result.to_json(), tables, typed=result)


METRIC = Metric(
    id="top_kernels",
    order=10,
    title="Top kernels",
    run=run,
    tables={"kernels": KERNEL_COLUMNS},
    description="Kernel time per (kernel name, device): calls, total, average, min, max, percentiles.",
)
