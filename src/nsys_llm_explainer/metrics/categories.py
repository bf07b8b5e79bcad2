"""categories: kernel time per category (GEMM, attention, norm ...) from the ordered regex
table in kernels/categories.py (matched on each kernel's function name, or the
functor of a generic launcher), globally, per device, per process and per phase.

The kernel set is exactly top_kernels' (every loaded kernel row), so shares add up to the
same total. Names are classified once per distinct name, then mapped to kernels by code.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import distinct_few, group_sum
from nsys_llm_explainer.analysis.join import (
    NO_PHASE,
    KernelCategories,
    instance_phases,
    kernel_attribution,
    kernel_categories,
)
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.kernels.categories import OTHER, load_table
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.kernels import (
    Categories,
    CategoryShare,
    CategoryTotal,
    DeviceCategories,
    PhaseCategories,
    ProcessCategories,
    UncategorizedName,
)
from nsys_llm_explainer.trace.data import Unavailable

SCOPE_COLUMNS = ("scope", "scope_id", "category", "kernel_count", "total_ns", "pct_of_scope_time")
NAME_COLUMNS = (
    "name", "category", "rule", "matched_text", "calls", "total_ns", "pct_of_kernel_time",
)
TOP_UNCATEGORIZED = 20
NO_PHASE_LABEL = "(no phase)"


def _rows(
    scope: str, scope_id: object, cats: list[str], code: np.ndarray, dur: np.ndarray
) -> list[dict]:
    n = len(cats)
    count = np.bincount(code, minlength=n)
    total = group_sum(dur, code, n)
    all_ns = int(total.sum())
    out = []
    for i in np.argsort(-total, kind="stable").tolist():
        if count[i] == 0 and cats[i] != OTHER:
            continue
        out.append(
            {
                "scope": scope,
                "scope_id": scope_id,
                "category": cats[i],
                "kernel_count": int(count[i]),
                "total_ns": int(total[i]),
                "pct_of_scope_time": round(100.0 * int(total[i]) / all_ns, 2) if all_ns else 0.0,
            }
        )
    return out


def _breakdown(scope: str, key: np.ndarray, kc: KernelCategories, dur: np.ndarray) -> list[dict]:
    """One entry per distinct key value: its total and category rows."""
    out = []
    for value in distinct_few(key).tolist():
        sel = key == value
        rows = _rows(scope, value, kc.categories, kc.code[sel], dur[sel])
        out.append({"id": value, "total_ns": int(dur[sel].sum()), "categories": rows})
    return out


def _phase_key(ctx: Context) -> tuple[np.ndarray, list[str]]:
    att = kernel_attribution(ctx.data)
    names = ctx.data.nvtx_names()
    inst_phase, phases = instance_phases(ctx, att, names)
    hit = att.range_pos >= 0
    kphase = np.where(
        hit, inst_phase[np.maximum(att.range_pos, 0)] if len(inst_phase) else NO_PHASE, NO_PHASE
    )
    labels = phases + [NO_PHASE_LABEL]
    return np.where(kphase == NO_PHASE, len(phases), kphase), labels


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    try:
        table = load_table(ctx.options.kernel_categories)
    except UsageError as exc:
        return METRIC.skipped(f"the kernel category file cannot be used ({exc.message})")
    kc = kernel_categories(ctx.data, table)
    total = int(k.dur.sum())
    global_rows = _rows("all", None, kc.categories, kc.code, k.dur)
    other_ns = next(r["total_ns"] for r in global_rows if r["category"] == OTHER)
    by_device = _breakdown("device", k.device, kc, k.dur)
    by_process = _breakdown("process", k.pid, kc, k.dur)
    notes: list[str] = []
    by_phase: list[dict] | None = None
    if ctx.options.phase_map:
        try:
            key, labels = _phase_key(ctx)
            by_phase = _breakdown("phase", key, kc, k.dur)
            for entry in by_phase:
                entry["id"] = labels[entry["id"]]
                for r in entry["categories"]:
                    r["scope_id"] = entry["id"]
        except Unavailable as exc:
            notes.append(f"no per-phase breakdown: {exc.reason}")
    n_names = len(kc.names)
    name_ns = group_sum(k.dur, kc.name_code, n_names)
    name_calls = np.bincount(kc.name_code, minlength=n_names)
    names = (
        pd.DataFrame(
            {
                "name": kc.names,
                "category": [kc.categories[c] for c in kc.name_category.tolist()],
                "rule": np.where(kc.name_rule >= 0, kc.name_rule + 1, 0),
                "matched_text": kc.matched,
                "calls": name_calls.astype(np.int64),
                "total_ns": name_ns,
                "pct_of_kernel_time": np.round(100.0 * name_ns / total, 4) if total else 0.0,
            }
        )
        .sort_values(["total_ns", "name"], ascending=[False, True], kind="stable")
        .reset_index(drop=True)
    )
    other = names[names["category"] == OTHER].head(TOP_UNCATEGORIZED)
    def shares(entry: dict) -> tuple[CategoryShare, ...]:
        return tuple(CategoryShare(r["category"], r["kernel_count"], r["total_ns"], r["pct_of_scope_time"])
                     for r in entry["categories"])

    result = Categories(
        table_source=table.source,
        rule_count=len(table.rules),
        name_mode=ctx.data.kernel_name_mode,
        kernel_count=int(len(k)),
        total_kernel_ns=total,
        categorized_pct=round(100.0 * (total - other_ns) / total, 2) if total else 0.0,
        other_pct=round(100.0 * other_ns / total, 2) if total else 0.0,
        categories=tuple(
            CategoryTotal(r["category"], r["kernel_count"], r["total_ns"], r["pct_of_scope_time"],
                          int((names["category"] == r["category"]).sum()))
            for r in global_rows
        ),
        by_device=tuple(DeviceCategories(e["id"], e["total_ns"], shares(e)) for e in by_device),
        by_process=tuple(ProcessCategories(e["id"], e["total_ns"], shares(e)) for e in by_process),
        by_phase=tuple(PhaseCategories(e["id"], e["total_ns"], shares(e)) for e in by_phase)
        if by_phase is not None else None,
        top_uncategorized=tuple(
            UncategorizedName(**r) for r in other.drop(columns=["category", "rule"]).to_dict("records")
        ),
    )
    scope_rows = global_rows + [
        r for e in by_device + by_process + (by_phase or []) for r in e["categories"]
    ]
    tables = (
        Table(
            "kernel_categories",
            SCOPE_COLUMNS,
            pd.DataFrame(scope_rows, columns=list(SCOPE_COLUMNS)),
        ),
        Table("kernel_category_names", NAME_COLUMNS, names),
    )
    return MetricResult(METRIC.id, result.to_json(), tables, tuple(notes), typed=result)


METRIC = Metric(
    id="categories",
    order=190,
    title="Kernel categories",
    run=run,
    tables={"kernel_categories": SCOPE_COLUMNS, "kernel_category_names": NAME_COLUMNS},
    description=(
        "Kernel time per category (GEMM, attention, MoE, norm, ...) overall, per "
        "device, process and phase."
    ),
    reads=("kernel_attribution", "kernel_categories:"),
)
