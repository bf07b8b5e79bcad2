"""step_work: the work inside complete steps, step by step, so two captures compare like with like.

Whole-capture totals divided by a step count mix in the partial steps a capture cuts at its
edges and whatever ran between steps; two captures cut different edges. Here every figure
comes from the steps the steps metric found (its step table: process, window, phase), which
are complete by construction (an NVTX or profiler range with its end, or a detected step
closed by the next one):

- A kernel belongs to a step when its launch call (the API call with its correlation id)
  starts inside the step's window on the same process; a kernel without a launch call, by
  its own start, unless it is work queued before the capture (analysis/carried.py: the
  steps metric's `carried`), which is in no step. Kernels in no step are counted as outside
  (capture edges, between steps, carried).
- Per step: its latency (the window), kernel time (sum of its kernels' durations), kernels,
  GPU busy (union of its kernels' intervals) and host time outside CUDA calls (the window
  minus the part of it the CUDA API calls of the process's launching thread cover (the thread
  that launched most of its in-step kernels; a call that began before the window counts for
  the part inside it): Python, scheduling, the host
  gaps between calls; not measured for a window outside the span of that thread's recorded
  calls, where the capture recorded no host calls at all).
- Per kernel name and per category (the categories metric's table): calls and time in
  steps, and the per-step series of both.

report.json keeps the per-step series of at most SERIES_STEPS steps (evenly spaced over the
complete steps when there are more, said by `series_steps`) and of the SERIES_NAMES names
with the most in-step time; the CSV tables hold every step and every name. diff compares
two captures on these series (diff/in_step.py).
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.analysis.comm_kernels import comm_mask
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.join import kernel_categories, kernel_launch_index
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.kernels.categories import load_table
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

SERIES_STEPS = 256
SERIES_NAMES = 24
STEP_COLUMNS = ("step", "phase", "pid", "start_ns", "end_ns", "latency_ns", "kernels",
                "kernel_ns", "busy_ns", "host_ns")
NAME_COLUMNS = ("name", "category", "comm", "calls", "ns", "steps_with", "calls_per_step",
                "ns_per_step", "per_call_ns")


def assign(data: TraceData, steps: pd.DataFrame) -> np.ndarray:
    """Per kernel: the row of `steps` (pid, start_ns, end_ns) whose window holds its launch
    call's start (its own start without a launch call), or -1; -1 for work queued before the
    capture (analysis/carried.py)."""
    k = data.kernels()
    out = np.full(len(k), -1, dtype=np.int32 if len(steps) < 2**31 else np.int64)
    if len(k) == 0 or steps.empty:
        return out
    try:
        call = kernel_launch_index(data)
        rt_start = data.runtime().start
    except Unavailable:
        call = np.full(len(k), -1, dtype=np.int64)
        rt_start = np.empty(0, dtype=np.int64)
    t = np.where(call >= 0, rt_start[np.maximum(call, 0)] if len(rt_start) else k.start, k.start)
    pids = steps["pid"].to_numpy(np.int64)
    starts = steps["start_ns"].to_numpy(np.int64)
    ends = steps["end_ns"].to_numpy(np.int64)
    for pid in np.unique(pids).tolist():
        rows = np.flatnonzero(pids == pid)
        rows = rows[np.argsort(starts[rows], kind="stable")]
        mine = np.flatnonzero(k.pid == pid)
        pos = np.searchsorted(starts[rows], t[mine], side="right") - 1
        ok = pos >= 0
        hit = rows[np.maximum(pos, 0)]
        ok &= t[mine] < ends[hit]
        out[mine[ok]] = hit[ok]
    out[carried(data).mask] = -1
    return out


def _host_ns(data: TraceData, steps: pd.DataFrame, kstep: np.ndarray) -> np.ndarray | str:
    """Per step: window minus the union of the launching thread's CUDA API calls in it."""
    try:
        rt = data.runtime()
        call = kernel_launch_index(data)
    except Unavailable as exc:
        return exc.reason
    if len(rt) == 0:
        return "the trace has no CUDA API calls"
    n = len(steps)
    pids = steps["pid"].to_numpy(np.int64)
    starts = steps["start_ns"].to_numpy(np.int64)
    ends = steps["end_ns"].to_numpy(np.int64)
    launched = (kstep >= 0) & (call >= 0)
    if not launched.any():
        return "no in-step kernel is joined to its launch call"
    # The launching thread of each process: the one that launched most of its in-step kernels.
    ktk = rt.tkey[call[launched]]
    kpid = pids[kstep[launched]]
    thread: dict[int, int] = {}
    for pid in np.unique(kpid).tolist():
        tk, counts = np.unique(ktk[kpid == pid], return_counts=True)
        thread[pid] = int(tk[np.argmax(counts)])
    covered = np.zeros(n, dtype=np.int64)
    recorded = np.zeros(n, dtype=bool)
    for pid, main_tk in thread.items():
        rows = np.flatnonzero(pids == pid)
        rows = rows[np.argsort(starts[rows], kind="stable")]
        calls = np.flatnonzero(rt.tkey == main_tk)
        cs, ce = rt.start[calls], rt.end[calls]
        # only windows inside the thread's recorded calls: past them the calls are not
        # recorded (a capture cut on the host side), which is not time outside CUDA calls
        recorded[rows] = (starts[rows] >= cs.min()) & (ends[rows] <= ce.max())
        # a call that began before the window (a long synchronize) covers it too
        us, ue = intervals.merge(cs, ce)
        covered[rows] = intervals.overlap_with_union(starts[rows], ends[rows], us, ue)
    host = (ends - starts) - covered
    return np.where(np.isin(pids, list(thread)) & recorded, host, -1)


def _sample(n: int) -> np.ndarray:
    if n <= SERIES_STEPS:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, SERIES_STEPS).round().astype(np.int64))


class NameWork(TypedDict):
    """One kernel name's work inside the steps (report.json `metrics.step_work.names`); the
    names with the most time also carry their per-step series."""

    name: str
    category: str
    comm: bool
    calls: int
    ns: int
    steps_with: int
    series_ns: NotRequired[list[int]]
    series_calls: NotRequired[int | list[int]]


def _constant_or_list(values: np.ndarray) -> int | list[int]:
    """A per-step count series: one number when every step has it, else the list."""
    if len(values) and (values == values[0]).all():
        return int(values[0])
    return [int(v) for v in values]


def run(ctx: Context) -> Outcome:
    found = ctx.result("steps")
    if found is None:
        return METRIC.skipped("no steps were found (see the steps section), so no work lies inside one")
    table = next((t for t in found.tables if t.name == "steps"), None)
    steps = table.rows() if table is not None else None
    if steps is None or steps.empty:
        return METRIC.skipped("the steps metric listed no step")
    steps = steps.sort_values(["pid", "start_ns"], kind="stable").reset_index(drop=True)
    k = ctx.data.kernels()
    n = len(steps)
    kstep = assign(ctx.data, steps)
    inside = kstep >= 0
    st = kstep[inside].astype(np.int64)
    start, end = k.start[inside], k.end[inside]
    dur = end - start
    kernel_ns = np.bincount(st, weights=dur, minlength=n).astype(np.int64)
    kernels = np.bincount(st, minlength=n).astype(np.int64)
    busy = intervals.grouped_union(st, start, end, n)
    del start, end
    host = _host_ns(ctx.data, steps, kstep)
    del kstep  # the per-kernel arrays below are what this metric's peak is made of
    host_reason = host if isinstance(host, str) else None
    host_arr = host if isinstance(host, np.ndarray) else np.full(n, -1, dtype=np.int64)
    latency = (steps["end_ns"] - steps["start_ns"]).to_numpy(np.int64)
    phases = list(dict.fromkeys(str(p) for p in steps["phase"]))
    phase_code = np.array([phases.index(str(p)) for p in steps["phase"]], dtype=np.int64)
    pick = _sample(n)

    # per name and per category
    try:
        cat_table = load_table(ctx.options.kernel_categories)
        kc = kernel_categories(ctx.data, cat_table)
        cats, kcat = kc.categories, kc.code
    except (UsageError, Unavailable):
        cats, kcat = ["other"], np.zeros(len(k), dtype=np.int64)
    is_comm = comm_mask(ctx.data)
    codes, uniq = factorize(k.name_id[inside])
    nn = len(uniq)
    name_ns = np.bincount(codes, weights=dur, minlength=nn).astype(np.int64)
    name_calls = np.bincount(codes, minlength=nn).astype(np.int64)
    first = np.zeros(nn, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    name_cat = kcat[inside][first] if nn else np.empty(0, np.int64)
    name_comm = is_comm[inside][first] if nn else np.empty(0, bool)
    lookup = ctx.data.kernel_names(np.asarray(uniq, dtype=np.int64))
    names = [lookup.get(int(i), f"(unnamed kernel #{int(i)})") for i in uniq]
    order = np.lexsort((np.array(names, dtype=object).astype(str), -name_ns)) if nn else np.empty(0, np.int64)
    steps_with = np.zeros(nn, dtype=np.int64)
    if nn:
        key = st * nn
        key += codes
        pairs = np.unique(key)
        del key
        steps_with = np.bincount(pairs % nn, minlength=nn)
    series_of = {int(c): i for i, c in enumerate(order[:SERIES_NAMES].tolist())}
    ns_series = np.zeros((len(series_of), n), dtype=np.int64)
    calls_series = np.zeros((len(series_of), n), dtype=np.int64)
    if series_of:
        row = np.full(nn, -1, dtype=np.int64)
        row[list(series_of)] = list(series_of.values())
        r = row[codes]
        sel = r >= 0
        flat = r[sel]
        del r
        flat *= n
        flat += st[sel]
        size = len(series_of) * n
        ns_series = np.bincount(flat, weights=dur[sel], minlength=size).astype(np.int64).reshape(-1, n)
        calls_series = np.bincount(flat, minlength=size).astype(np.int64).reshape(-1, n)
    name_rows: list[NameWork] = []
    csv_rows = []
    for c in order.tolist():
        entry: NameWork = {
            "name": names[c], "category": cats[int(name_cat[c])], "comm": bool(name_comm[c]),
            "calls": int(name_calls[c]), "ns": int(name_ns[c]), "steps_with": int(steps_with[c]),
        }
        csv_rows.append({**entry, "calls_per_step": round(name_calls[c] / n, 3),
                         "ns_per_step": round(name_ns[c] / n, 1),
                         "per_call_ns": round(name_ns[c] / name_calls[c], 1) if name_calls[c] else None})
        if c in series_of:
            i = series_of[c]
            entry["series_ns"] = [int(v) for v in ns_series[i][pick]]
            entry["series_calls"] = _constant_or_list(calls_series[i][pick])
        name_rows.append(entry)
    ncat = len(cats)
    cat_of_kernel = kcat[inside]
    key = (cat_of_kernel * n).astype(np.int64, copy=False)
    del cat_of_kernel
    key += st
    cat_ns = np.bincount(key, weights=dur, minlength=ncat * n).astype(np.int64).reshape(ncat, n)
    del key
    cat_rows = [
        {"category": cats[c], "ns": int(cat_ns[c].sum()),
         "series_ns": [int(v) for v in cat_ns[c][pick]]}
        for c in np.argsort(-cat_ns.sum(axis=1), kind="stable").tolist() if cat_ns[c].sum() > 0
    ]
    data = {
        "steps_method": found.data.get("method"),
        "assigned_by": "launch call start",
        "steps": n,
        "processes": int(steps["pid"].nunique()),
        "phases": phases,
        "kernels": int(inside.sum()),
        "kernel_ns": int(dur.sum()),
        "outside_kernels": int((~inside).sum()),
        "outside_ns": int(k.dur[~inside].sum()),
        "host_reason": host_reason,
        "series_steps": int(len(pick)),
        "per_step": {
            "phase": [int(v) for v in phase_code[pick]],
            "pid": [int(v) for v in steps["pid"].to_numpy(np.int64)[pick]],
            "latency_ns": [int(v) for v in latency[pick]],
            "kernel_ns": [int(v) for v in kernel_ns[pick]],
            "kernels": [int(v) for v in kernels[pick]],
            "busy_ns": [int(v) for v in busy[pick]],
            "host_ns": None if host_reason else [int(v) for v in host_arr[pick]],
        },
        "categories": cat_rows,
        "names": name_rows,
    }
    step_rows = pd.DataFrame({
        "step": steps["step"].to_numpy() if "step" in steps else np.arange(n),
        "phase": steps["phase"].astype(str).to_numpy(), "pid": steps["pid"].to_numpy(np.int64),
        "start_ns": steps["start_ns"].to_numpy(np.int64), "end_ns": steps["end_ns"].to_numpy(np.int64),
        "latency_ns": latency, "kernels": kernels, "kernel_ns": kernel_ns, "busy_ns": busy,
        "host_ns": np.where(host_arr >= 0, host_arr, np.nan) if not host_reason else np.nan,
    })
    notes: tuple[str, ...] = ()
    if host_reason:
        notes = (f"host time outside CUDA calls is not measured, because {host_reason}",)
    return MetricResult(
        METRIC.id, data,
        (Table("step_work", STEP_COLUMNS, step_rows),
         Table("step_work_kernels", NAME_COLUMNS, pd.DataFrame(csv_rows, columns=list(NAME_COLUMNS)))),
        notes,
    )


METRIC = Metric(
    id="step_work",
    # after steps: the work inside its complete steps
    order=140,
    title="Work inside steps",
    run=run,
    tables={"step_work": STEP_COLUMNS, "step_work_kernels": NAME_COLUMNS},
    description="Per complete step: latency, kernel time, GPU busy and host time outside CUDA calls; "
    "per kernel name and category: calls and time in steps.",
    after=("steps",),
    reads=("runtime", "kernel_launch_index", "kernel_categories:", "comm_mask", "carried"),
)
