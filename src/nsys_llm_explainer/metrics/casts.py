"""casts: dtype-conversion kernels, and whether the same casts repeat in every step.

A cast kernel is one whose demangled name says it converts a dtype (CAST_NAME): PyTorch's
`bfloat16_copy_kernel_cuda` / `float8_copy_kernel_cuda` style copies, copy kernels that load
or store with a cast (`direct_copy_kernel_cuda` with `LoadWithCast` / `StoreWithCast`), and
kernels named cast or convert. With steps (steps metric), casts are counted per step: they repeat every step when
at least REPEAT_SHARE of at least MIN_STEPS steps hold some and the count per step is stable
(p90 at most STABLE_RATIO times p10): the pattern of weights re-cast in each forward
(autocast over fp32 weights, `.to(dtype)` inside forward). Cast time launched inside an FSDP
range (fsdp_ns) is FSDP's mixed precision: each unit's parameters cast to param_dtype before
its all-gather, the gradients back after the reduce-scatter.
"""

from __future__ import annotations

import math
import re

import numpy as np

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import group_sum
from nsys_llm_explainer.analysis.join import kernel_attribution
from nsys_llm_explainer.analysis.nvtx import climb
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome
from nsys_llm_explainer.results.kernels import CastDevice, CastKernel, Casts, CastsPerStep
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import Unavailable

CAST_NAME = re.compile(
    r"(bfloat16|half|float8\w*|float16|float|double|int\d*|uint\d*|bool)_copy_kernel_cuda|"
    r"direct_copy_kernel_cuda.*(LoadWithCast|StoreWithCast)|(^|[^a-z])cast(_|<|\(|kernel)|"
    r"convert\w*kernel|to_dtype",
    re.IGNORECASE,
)
MIN_STEPS = 3
REPEAT_SHARE = 0.8
STABLE_RATIO = 1.5
# FSDP's mixed precision: the casts of each unit's parameters before its all-gather (and of the
# gradients after the reduce-scatter) run inside its ranges.
FSDP_RANGE = re.compile(r"FullyShardedDataParallel|FSDP|fully_?shard|FlatParam", re.IGNORECASE)


def _fsdp_ns(ctx: Context, is_cast: np.ndarray) -> int:
    """Cast kernel time launched inside an FSDP range (FSDP_RANGE: the innermost range around
    the launch or any range enclosing it on its thread)."""
    if not is_cast.any():
        return 0
    try:
        names = ctx.data.nvtx_names()
        nv = ctx.data.nvtx()
        att = kernel_attribution(ctx.data)
    except Unavailable:
        return 0
    if not len(att.index.order):
        return 0
    hit = np.array([FSDP_RANGE.search(n) is not None for n in names] or [False])
    mark = np.where(hit[nv.name[att.index.order]], 0, -1)
    rows = np.flatnonzero(is_cast)
    _, _, found = climb(att.index, att.range_pos[rows].astype(np.int64), np.zeros(len(mark), dtype=bool), mark)
    return int(ctx.data.kernels().dur[rows[found == 0]].sum())


def _per_step(ctx: Context, is_cast: np.ndarray) -> CastsPerStep | None:
    steps = ctx.result("steps")
    table = next((t for t in steps.tables if t.name == "steps"), None) if steps is not None else None
    if table is None or table.frame is None or len(table.frame) < MIN_STEPS:
        return None
    k = ctx.data.kernels()
    f = table.frame
    s0, s1, pid = (f[c].to_numpy(np.int64) for c in ("start_ns", "end_ns", "pid"))
    counts = np.zeros(len(f), np.int64)
    cast_ns = np.zeros(len(f), np.int64)
    idx = np.flatnonzero(is_cast)
    for p in np.unique(pid).tolist():  # per process: casts sorted by start, steps by binary search
        mine = idx[k.pid[idx] == p]
        mine = mine[np.argsort(k.start[mine], kind="stable")]
        starts, cum = k.start[mine], np.r_[0, np.cumsum(k.dur[mine])]
        sel = pid == p
        lo, hi = np.searchsorted(starts, s0[sel], "left"), np.searchsorted(starts, s1[sel], "left")
        counts[sel] = hi - lo
        cast_ns[sel] = cum[hi] - cum[lo]
    with_casts = int((counts > 0).sum())
    p = percentiles(counts, (10, 50, 90))
    stable = bool(p[10] and p[90] <= STABLE_RATIO * p[10])
    every = with_casts >= math.ceil(REPEAT_SHARE * len(f)) and stable
    return CastsPerStep(
        steps=int(len(f)),
        steps_with_casts=with_casts,
        casts_per_step_p50=p[50],
        cast_ns_per_step_p50=percentiles(cast_ns, (50,))[50],
        every_step=every,
    )


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    codes, uniq = factorize(k.name_id)
    lookup = ctx.data.kernel_names(np.asarray(uniq))
    names = [lookup.get(int(i), "") for i in uniq]
    is_name_cast = np.array([bool(CAST_NAME.search(n)) for n in names] or [False], dtype=bool)
    is_cast = is_name_cast[codes] if len(codes) else np.zeros(0, bool)
    time = group_sum(k.dur, codes, len(uniq))
    calls = np.bincount(codes, minlength=len(uniq))
    top = [i for i in np.argsort(-time, kind="stable").tolist() if is_name_cast[i]][:5]
    devices = [
        {"device_id": int(d), "cast_ns": int(k.dur[is_cast & (k.device == d)].sum())}
        for d in np.unique(k.device[is_cast]).tolist()
    ]
    per_step = _per_step(ctx, is_cast)
    result = Casts(
        cast_kernels=int(is_cast.sum()),
        cast_ns=int(k.dur[is_cast].sum()),
        pct_of_kernel_time=round(100.0 * int(k.dur[is_cast].sum()) / int(k.dur.sum()), 2) if k.dur.sum() else 0.0,
        devices=tuple(CastDevice(**d) for d in devices),
        top=tuple(CastKernel(names[i], int(calls[i]), int(time[i])) for i in top),
        per_step=per_step,
        fsdp_ns=_fsdp_ns(ctx, is_cast),
    )
    notes = () if result.per_step is not None else (
        f"per-step repetition not measured, because fewer than {MIN_STEPS} steps were found",)
    return MetricResult(METRIC.id, result.to_json(), notes=notes, typed=result)


METRIC = Metric(
    id="casts",
    order=170,
    title="Dtype casts",
    run=run,
    description="Dtype-conversion kernels, and whether the same casts repeat in every step "
    "(weights re-cast each forward).",
    after=("steps",),
)
