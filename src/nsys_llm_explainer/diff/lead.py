"""The headline: whether the captures compare, the step time change, then the largest change
beyond the noise, each with its interval and sample sizes.

Candidates are the per-step changes whose interval excludes no change: host time outside
CUDA calls, each kernel category's time per step, each matched kernel's time per step or per
call. They are ranked by how much step time they move (`delta_ns`: the change per step at the
base median). A category gives way to one of its kernels when that kernel alone carries at
least KERNEL_SHARE of the category's change (the kernel is the more specific answer). A
kernel's size is its change per call when that is beyond the noise (the kernel itself got
slower or faster), else its change of time per step (it ran more or less often).
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diff.comparability import Comparability

KERNEL_SHARE = 0.9
LISTED = 3


def pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:+.1f}%"


def interval(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "no 95% interval"
    return f"95% CI {pct(low)} to {pct(high)}"


def signed_dur(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    return ("+" if ns > 0 else "-" if ns < 0 else "\u00b1") + fmt.dur(abs(ns))


def _kernel_item(r: dict[str, Any], label: str) -> dict[str, Any]:
    per_call = r["per_call_pct"] is not None and r["per_call_low_pct"] is not None and (
        r["per_call_low_pct"] > 0 or r["per_call_high_pct"] < 0)
    size = ("per_call_pct", "per_call_low_pct", "per_call_high_pct") if per_call else (
        "time_pct", "time_low_pct", "time_high_pct")
    return {"kind": "kernel", "label": label, "name": r["new_name"] or r["base_name"],
            "category": r.get("category"), "measure": "per call" if per_call else "time per step",
            "change_pct": r[size[0]], "low_pct": r[size[1]], "high_pct": r[size[2]],
            "delta_ns": r["time_delta_ns"]}


def candidates(step_rows: list[dict[str, Any]], categories: list[dict[str, Any]],
               kernel_rows: list[dict[str, Any]], label: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    host = next((r for r in step_rows if r["id"] == "host_time" and r["status"] == "ok"), None)
    if host and host["beyond_noise"]:
        out.append({"kind": "host", "label": "host time outside CUDA calls", "name": None,
                    "category": None, "measure": "per step", "change_pct": host["change_pct"],
                    "low_pct": host["low_pct"], "high_pct": host["high_pct"], "delta_ns": host["delta_ns"]})
    for c in categories:
        if c["status"] == "ok" and c["beyond_noise"] and c["delta_ns"]:
            out.append({"kind": "category", "label": f"{c['category']} kernels", "name": None,
                        "category": c["category"], "measure": "time per step",
                        "change_pct": c["change_pct"], "low_pct": c["low_pct"], "high_pct": c["high_pct"],
                        "delta_ns": c["delta_ns"]})
    kernels = [_kernel_item(r, label(r["new_name"] or r["base_name"])) for r in kernel_rows
               if r["match"] in ("same", "renamed") and r.get("beyond_noise") and r.get("time_delta_ns")]
    out += kernels
    out.sort(key=lambda c: (-abs(c["delta_ns"] or 0.0), c["label"]))
    # a category whose change one kernel carries gives way to that kernel
    chosen: list[dict[str, Any]] = []
    for c in out:
        if c["kind"] == "category":
            inside = [k for k in kernels if k["category"] == c["category"]
                      and (k["delta_ns"] or 0) * c["delta_ns"] > 0
                      and abs(k["delta_ns"]) >= KERNEL_SHARE * abs(c["delta_ns"])]
            if inside:
                continue
        if c["kind"] == "kernel" and any(x["kind"] == "kernel" and x["name"] == c["name"] for x in chosen):
            continue
        chosen.append(c)
    return chosen


def item_text(c: dict[str, Any], hardware: str | None) -> str:
    if c["change_pct"] is None and (c["delta_ns"] or 0) > 0:
        # none on BASE: no percentage or interval to give, only what NEW added
        what = f"{c['label']}, none in BASE's steps, {signed_dur(c['delta_ns'])} per step in NEW's"
    else:
        what = f"{c['label']} {pct(c['change_pct'])} {c['measure']} ({interval(c['low_pct'], c['high_pct'])})"
        what += f", {signed_dur(c['delta_ns'])} per step"
    if hardware and c["kind"] in ("kernel", "category"):
        what += f", with the GPU change ({hardware})"
    return what


def step_text(r: dict[str, Any] | None, reason: str | None) -> str:
    if r is None or r["status"] != "ok":
        return f"Step time not compared ({reason or (r or {}).get('reason')})"
    sizes = f"median {fmt.dur(r['base_median'])} to {fmt.dur(r['new_median'])}, {r['n_base']} vs {r['n_new']} steps"
    if r["low_pct"] is None:
        return f"Step time {pct(r['change_pct'])} (no 95% interval with {r['n_base']} vs {r['n_new']} steps; {sizes})"
    if not r["beyond_noise"]:
        return f"Step time within the noise: {pct(r['change_pct'])} ({interval(r['low_pct'], r['high_pct'])}; {sizes})"
    return f"Step time {pct(r['change_pct'])} ({interval(r['low_pct'], r['high_pct'])}; {sizes})"


def build(comp: Comparability, step_rows: list[dict[str, Any]], categories: list[dict[str, Any]],
          kernel_rows: list[dict[str, Any]], label: Any, in_step_reason: str | None,
          hardware: str | None) -> dict[str, Any]:
    step = next((r for r in step_rows if r["id"] == "step_time"), None)
    items = candidates(step_rows, categories, kernel_rows, label) if not in_step_reason else []
    parts = []
    if not comp.comparable:
        # The verdict stops at "not comparable": a shift "beyond the noise" between two different
        # workloads is not the effect of a change, so none is named here.
        parts.append("Not comparable: " + "; ".join(comp.reasons) + ". Figures below are for reference only")
    else:
        parts.append(step_text(step, in_step_reason))
    if in_step_reason or not comp.comparable:
        pass
    elif items:
        parts.append("largest change beyond the noise: " + item_text(items[0], hardware))
    else:
        parts.append("no kernel, category or host-time change beyond the noise")
    text = ". ".join(p[0].upper() + p[1:] for p in parts) + "."
    return {"comparable": comp.comparable, "text": text, "step_time": step,
            "changes": items[:LISTED], "beyond_noise": len(items)}
