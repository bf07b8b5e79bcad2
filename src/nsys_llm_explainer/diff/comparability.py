"""Whether two captures can be compared at all, checked before any figure and said first.

Each check reads both report.json documents and gives `same`, `differs` or `unknown` (a side
does not record it). A check that differs is blocking when a change it causes would read as
a change of the program (the hardware, the job's shape, the program itself, the unit a step
stands for); the others are cautions. What cannot be checked is said, never taken as the
same: GPU models that a capture does not record make the check `unknown`, with a caution.

| check | blocking when |
|---|---|
| gpus: GPU models and count of devices that ran kernels | the models or the count differ (unknown models: caution) |
| world: world size and rank (distributedInfo; NCCL ranks in nsys) | world sizes differ (another rank: caution) |
| versions: trace format, profiler/exporter versions | never (caution) |
| kernels: kernel time whose kernel names occur on both sides | under MIN_OVERLAP of either side's kernel time |
| steps: how steps were found, and kernels per step | methods differ, or kernels per step differ > STEP_WORK_RATIO |
| capture: window length and complete steps | never (caution below MIN_STEPS steps or windows WINDOW_RATIO apart) |

A figure that cannot be true (GPU busy longer than the window, a negative idle time, a step's
GPU busy above its kernel time) is an error: listed in `errors` and among the reasons, and the
two captures are not comparable.

The headline: whether the captures compare, the step time change, then the largest change
beyond the noise, each with its interval and sample sizes.

Candidates are the per-step changes whose interval excludes no change: host time outside
CUDA calls, each kernel category's time per step, each matched kernel's time per step or per
call. They are ranked by how much step time they move (`delta_ns`: the change per step at the
base median). A category gives way to one of its kernels when that kernel alone carries at
least KERNEL_SHARE of the category's change (the kernel is the more specific answer). A
kernel's size is its change per call when that is beyond the noise (the kernel itself got
slower or faster), else its change of time per step (it ran more or less often)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypedDict

import numpy as np

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diff.in_step import CategoryChangeRow, ChangeRow
from nsys_llm_explainer.diff.kernels import KernelRow, KernelsSection
from nsys_llm_explainer.diff.load import DistributedDoc, Side

MIN_OVERLAP = 0.5  # share of kernel time in names present on both sides
OVERLAP_CAUTION = 0.9
STEP_WORK_RATIO = 3.0  # kernels per step, larger / smaller
STEP_WORK_CAUTION = 1.5
MIN_STEPS = 3
WINDOW_RATIO = 10.0
TOLERANCE = 1.001  # rounding slack for the plausibility checks


CheckValue = str | float | None  # what a check found on a side: a text, or a share of kernel time


class CheckDoc(TypedDict):
    """diff.json `comparability.checks`."""

    id: str
    label: str
    base: CheckValue
    new: CheckValue
    verdict: Literal["same", "differs", "unknown"]
    blocking: bool
    caution: bool
    detail: str


class ComparabilityDoc(TypedDict):
    """diff.json `comparability`."""

    comparable: bool
    reasons: list[str]
    cautions: list[str]
    errors: list[str]
    checks: list[CheckDoc]


@dataclass
class Check:
    id: str
    label: str
    base: CheckValue
    new: CheckValue
    verdict: Literal["same", "differs", "unknown"]
    blocking: bool
    detail: str
    caution: bool = False  # an unknown worth a caution (what it does not know matters)

    @property
    def cautious(self) -> bool:
        return not self.blocking and (self.verdict == "differs" or (self.verdict == "unknown" and self.caution))

    def to_json(self) -> CheckDoc:
        return {"id": self.id, "label": self.label, "base": self.base, "new": self.new,
                "verdict": self.verdict, "blocking": self.blocking, "caution": self.cautious,
                "detail": self.detail}


@dataclass
class Comparability:
    checks: list[Check]
    errors: list[str] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        return [c.detail for c in self.checks if c.blocking] + self.errors

    @property
    def cautions(self) -> list[str]:
        return [c.detail for c in self.checks if c.cautious]

    @property
    def comparable(self) -> bool:
        return not self.reasons

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)

    @property
    def hardware_changed(self) -> bool:
        c = self.check("gpus")
        return c is not None and c.verdict == "differs"

    def to_json(self) -> ComparabilityDoc:
        return {"comparable": self.comparable, "reasons": self.reasons, "cautions": self.cautions,
                "errors": list(self.errors), "checks": [c.to_json() for c in self.checks]}


def used_gpus(side: Side) -> list[str] | None:
    """Model name of each device that ran kernels (device order); None when unknown."""
    tk = side.metric("top_kernels")
    devices = tk.get("devices") if tk else None
    if not isinstance(devices, list) or not devices:
        return None
    names = {g.get("device_id"): g.get("name") for g in side.doc.get("trace", {}).get("gpus", [])
             if isinstance(g, dict)}
    return [str(names.get(d) or "unknown model") for d in devices]


def gpu_text(models: list[str] | None) -> str:
    if not models:
        return "unknown GPUs"
    counts: dict[str, int] = {}
    for m in models:
        counts[m] = counts.get(m, 0) + 1
    return " + ".join(f"{n} x {m}" for m, n in counts.items())


def _gpus(base: Side, new: Side) -> Check:
    b, n = used_gpus(base), used_gpus(new)
    label = "GPU models and count"
    if b is None or n is None:
        return Check("gpus", label, gpu_text(b), gpu_text(n), "unknown", False,
                     "the GPUs of one side are unknown (no kernels)")
    known = "unknown model" not in b and "unknown model" not in n
    same_models = sorted(set(b)) == sorted(set(n))
    if len(b) == len(n) and not known:
        which = ("neither capture records" if all(m == "unknown model" for m in b + n)
                 else "a capture does not record")
        return Check("gpus", label, gpu_text(b), gpu_text(n), "unknown", False,
                     f"{which} its GPU model: whether both ran on the same GPU cannot be checked "
                     f"({len(b)} GPU{'s' if len(b) != 1 else ''} on each side)", caution=True)
    if len(b) == len(n) and same_models:
        return Check("gpus", label, gpu_text(b), gpu_text(n), "same", False, f"{gpu_text(b)} on both sides")
    what = []
    if known and not same_models:
        what.append("different GPU models")
    if len(b) != len(n):
        what.append(f"{len(b)} vs {len(n)} GPUs")
    return Check("gpus", label, gpu_text(b), gpu_text(n), "differs", True,
                 f"{' and '.join(what)}: BASE ran on {gpu_text(b)}, NEW on {gpu_text(n)}")


def world(side: Side) -> DistributedDoc | None:
    d = side.doc.get("trace", {}).get("distributed")
    return d if isinstance(d, dict) else None


def world_text(w: DistributedDoc | None) -> str:
    if not w or w.get("world_size") is None:
        return "not recorded"
    rank = w.get("rank")
    return f"rank {rank} of {w['world_size']}" if rank is not None else f"world size {w['world_size']}"


def _world(base: Side, new: Side) -> Check:
    b, n = world(base), world(new)
    label = "world size and rank"
    bt, nt = world_text(b), world_text(n)
    if not b or not n or b.get("world_size") is None or n.get("world_size") is None:
        both = "either side" if not (b or n) else "one side"
        return Check("world", label, bt, nt, "unknown", False, f"{both} does not record its world size")
    if b["world_size"] != n["world_size"]:
        return Check("world", label, bt, nt, "differs", True,
                     f"different jobs: world size {b['world_size']} vs {n['world_size']} ({bt} vs {nt})")
    if b.get("rank") != n.get("rank"):
        return Check("world", label, bt, nt, "differs", False,
                     f"different ranks of a job of {b['world_size']} ({bt} vs {nt}): ranks can do different work")
    return Check("world", label, bt, nt, "same", False, f"{bt} on both sides")


def versions(side: Side) -> str:
    t = side.doc.get("trace", {})
    fmt_id = t.get("format") or "unknown format"
    if t.get("nsys_version"):
        return f"{fmt_id}, Nsight Systems {t['nsys_version']} (export schema {t.get('export_schema_version')})"
    details = t.get("kineto")
    found = {k: v for k, v in details.items() if "version" in k.lower()} if isinstance(details, dict) else {}
    if found:
        return fmt_id + ", " + ", ".join(f"{k} {v}" for k, v in sorted(found.items()))
    return str(fmt_id)


def _versions(base: Side, new: Side) -> Check:
    b, n = versions(base), versions(new)
    label = "profiler and exporter versions"
    fb, fn = base.doc.get("trace", {}).get("format"), new.doc.get("trace", {}).get("format")
    if b == n:
        return Check("versions", label, b, n, "same", False, f"{b} on both sides")
    if fb != fn:
        return Check("versions", label, b, n, "differs", False,
                     f"different profilers ({fb} vs {fn}): launches, copies and host ranges are recorded differently")
    return Check("versions", label, b, n, "differs", False,
                 f"different profiler or exporter versions ({b} vs {n})")


def _kernels(kern: KernelsSection) -> Check:
    label = "kernel names in common, by time"
    if kern.get("status") != "ok":
        return Check("kernels", label, None, None, "unknown", False,
                     f"kernels were not compared ({kern.get('reason')})")
    rows = kern["rows"]
    tb = sum(r["base_total_ns"] for r in rows)
    tn = sum(r["new_total_ns"] for r in rows)
    mb = sum(r["base_total_ns"] for r in rows if r["match"] in ("same", "renamed"))
    mn = sum(r["new_total_ns"] for r in rows if r["match"] in ("same", "renamed"))
    sb = mb / tb if tb else None
    sn = mn / tn if tn else None
    matched = sum(1 for r in rows if r["match"] in ("same", "renamed"))
    names = f"{matched} of {len(rows)} kernel names"
    if sb is None or sn is None:
        return Check("kernels", label, sb, sn, "unknown", False, "a side ran no kernel")
    low = min(sb, sn)
    share = f"{fmt.pct(100 * sb)} of BASE's and {fmt.pct(100 * sn)} of NEW's kernel time"
    if low < MIN_OVERLAP:
        return Check("kernels", label, round(sb, 4), round(sn, 4), "differs", True,
                     f"different programs: {names} occur on both sides, {share}")
    return Check("kernels", label, round(sb, 4), round(sn, 4), "differs" if low < OVERLAP_CAUTION else "same", False,
                 f"{names} occur on both sides, {share}")


def step_definition(side: Side) -> tuple[str | None, float | None]:
    """(how steps were found, kernels per step) or (None, None) without steps."""
    sw = side.metric("step_work")
    st = side.metric("steps")
    method = (st or {}).get("method")
    if sw and sw.get("steps"):
        # the statistic the per-step table shows: the median over the steps
        per = (sw.get("per_step") or {}).get("kernels")
        mid = float(np.median(per)) if isinstance(per, list) and per else sw["kernels"] / sw["steps"]
        return sw.get("steps_method") or method, mid
    if st:
        phases = [p for p in st.get("phases", []) if isinstance(p, dict)]
        n = sum(int(p.get("steps", 0)) for p in phases)
        k = sum(float(p.get("kernels_per_step", 0)) * int(p.get("steps", 0)) for p in phases)
        return method, (k / n if n else None)
    return None, None


def _steps(base: Side, new: Side) -> Check:
    (mb, kb), (mn, kn) = step_definition(base), step_definition(new)
    label = "step definition"
    bt = f"{mb}, {kb:,.1f} kernels per step" if mb and kb else (mb or "no steps")
    nt = f"{mn}, {kn:,.1f} kernels per step" if mn and kn else (mn or "no steps")
    if not mb or not mn:
        return Check("steps", label, bt, nt, "unknown", False,
                     "steps were not found on " + ("either side" if not (mb or mn) else "one side"))
    if mb != mn:
        return Check("steps", label, bt, nt, "differs", True,
                     f"steps are defined differently ({mb.replace('_', ' ')} vs {mn.replace('_', ' ')}): "
                     "per-step figures do not describe the same unit of work")
    if kb and kn:
        ratio = max(kb, kn) / min(kb, kn)
        if ratio > STEP_WORK_RATIO:
            return Check("steps", label, bt, nt, "differs", True,
                         f"the steps found hold different amounts of work ({kb:,.1f} vs {kn:,.1f} kernels "
                         "per step): a step is not the same unit on both sides")
        if ratio > STEP_WORK_CAUTION:
            return Check("steps", label, bt, nt, "differs", False,
                         f"kernels per step changed from {kb:,.1f} to {kn:,.1f}")
    return Check("steps", label, bt, nt, "same", False, f"steps by {mb.replace('_', ' ')} on both sides")


def _window(side: Side) -> int | None:
    t = side.doc.get("trace", {})
    s, e = t.get("window_start_ns"), t.get("window_end_ns")
    return e - s if isinstance(s, int) and isinstance(e, int) and e > s else None


def complete_steps(side: Side) -> int | None:
    sw = side.metric("step_work")
    return int(sw["steps"]) if sw and sw.get("steps") else None


def _capture(base: Side, new: Side) -> Check:
    wb, wn = _window(base), _window(new)
    sb, sn = complete_steps(base), complete_steps(new)
    label = "capture length"

    def text(w: int | None, s: int | None) -> str:
        return f"{fmt.dur(w) if w else 'unknown window'}, {s if s else 'no'} complete steps"

    bt, nt = text(wb, sb), text(wn, sn)
    notes = []
    if sb is not None and sn is not None and min(sb, sn) < MIN_STEPS:
        notes.append(f"few complete steps ({sb} vs {sn}): intervals are wide")
    if wb and wn and max(wb, wn) / min(wb, wn) > WINDOW_RATIO:
        notes.append(f"captures of very different length ({fmt.dur(wb)} vs {fmt.dur(wn)})")
    if notes:
        return Check("capture", label, bt, nt, "differs", False, "; ".join(notes))
    if wb is None or wn is None:
        return Check("capture", label, bt, nt, "unknown", False, "a captured window is unknown")
    return Check("capture", label, bt, nt, "same", False, f"{bt} vs {nt}")


def implausible(side: Side) -> list[str]:
    """Figures of one side that cannot be true."""
    out = []
    idle = side.metric("gpu_idle")
    for d in (idle or {}).get("devices", []):
        if not isinstance(d, dict):
            continue
        w = d.get("window_end_ns", 0) - d.get("window_start_ns", 0)
        if d.get("busy_ns", 0) > w * TOLERANCE or d.get("idle_ns", 0) < 0:
            out.append(f"{side.role} GPU {d.get('device_id')}: busy {fmt.dur(d.get('busy_ns'))} and idle "
                       f"{fmt.dur(d.get('idle_ns'))} in a window of {fmt.dur(w)} cannot both be true")
    sw = side.metric("step_work")
    per = (sw or {}).get("per_step") or {}
    bad = [i for i, (b, k) in enumerate(zip(per.get("busy_ns", []), per.get("kernel_ns", []), strict=False))
           if b > k * TOLERANCE or b < 0]
    if bad:
        out.append(f"{side.role}: {len(bad)} steps are busier than the kernels they ran (GPU busy above the "
                   "summed kernel time)")
    return out


def _why_no_work(side: Side) -> str | None:
    """Why a side captured no GPU work (its diagnosis), or None when it has some."""
    diag = side.doc.get("diagnosis")
    if not isinstance(diag, dict) or diag.get("verdict") != "no_gpu_work":
        return None
    summary = str(diag.get("summary") or "no kernels were captured").removeprefix("No GPU work: ")
    return summary.split(". ")[0].rstrip(".")


def _gpu_work(base: Side, new: Side) -> Check | None:
    """A capture with no GPU work has nothing to compare: the reason is its own (how the run
    went, what was not traced), not a metric that followed from it. None when both have work."""
    b, n = _why_no_work(base), _why_no_work(new)
    if b is None and n is None:
        return None
    parts = [f"{side.role} captured no GPU work: {why}" for side, why in ((base, b), (new, n)) if why]
    return Check("gpu_work", "GPU work captured", "no" if b else "yes", "no" if n else "yes",
                 "same" if b and n else "differs", True, "nothing to compare: " + "; ".join(parts))


def check(base: Side, new: Side, kern: KernelsSection) -> Comparability:
    work = _gpu_work(base, new)
    checks = [*([work] if work else []), _gpus(base, new), _world(base, new), _versions(base, new),
              _kernels(kern), _steps(base, new), _capture(base, new)]
    return Comparability(checks, implausible(base) + implausible(new))


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


class Candidate(TypedDict):
    """diff.json `headline.changes`: a change beyond the noise, sized by the step time it moves."""

    kind: Literal["host", "category", "kernel"]
    label: str
    name: str | None
    category: str | None
    measure: str
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    delta_ns: float | None


class Headline(TypedDict):
    """diff.json `headline`."""

    comparable: bool
    text: str
    step_time: ChangeRow | None
    changes: list[Candidate]
    beyond_noise: int


def _kernel_item(r: KernelRow, label: str) -> Candidate:
    lo, hi = r["per_call_low_pct"], r["per_call_high_pct"]  # both or neither
    per_call = r["per_call_pct"] is not None and lo is not None and (lo > 0 or (hi is not None and hi < 0))
    size = (r["per_call_pct"], lo, hi) if per_call else (r["time_pct"], r["time_low_pct"], r["time_high_pct"])
    return {"kind": "kernel", "label": label, "name": r["new_name"] or r["base_name"],
            "category": r.get("category"), "measure": "per call" if per_call else "time per step",
            "change_pct": size[0], "low_pct": size[1], "high_pct": size[2],
            "delta_ns": r["time_delta_ns"]}


def candidates(step_rows: list[ChangeRow], categories: list[CategoryChangeRow],
               kernel_rows: list[KernelRow], label: Callable[[str | None], str]) -> list[Candidate]:
    out: list[Candidate] = []
    host = next((r for r in step_rows if r["id"] == "host_time" and r["status"] == "ok"), None)
    if host and host["beyond_noise"]:
        out.append({"kind": "host", "label": "host time outside CUDA calls", "name": None,
                    "category": None, "measure": "per step", "change_pct": host["change_pct"],
                    "low_pct": host["low_pct"], "high_pct": host["high_pct"], "delta_ns": host["delta_ns"]})
    for g in categories:
        if g["status"] == "ok" and g["beyond_noise"] and g["delta_ns"]:
            out.append({"kind": "category", "label": f"{g['category']} kernels", "name": None,
                        "category": g["category"], "measure": "time per step",
                        "change_pct": g["change_pct"], "low_pct": g["low_pct"], "high_pct": g["high_pct"],
                        "delta_ns": g["delta_ns"]})
    kernels = [_kernel_item(r, label(r["new_name"] or r["base_name"])) for r in kernel_rows
               if r["match"] in ("same", "renamed") and r.get("beyond_noise") and r.get("time_delta_ns")]
    out += kernels
    out.sort(key=lambda c: (-abs(c["delta_ns"] or 0.0), c["label"]))
    # a category whose change one kernel carries gives way to that kernel
    chosen: list[Candidate] = []
    for c in out:
        if c["kind"] == "category":
            moved = c["delta_ns"] or 0.0  # never 0 or None for a category (above), nor for a kernel
            inside = [k for k in kernels if k["category"] == c["category"]
                      and (k["delta_ns"] or 0) * moved > 0
                      and abs(k["delta_ns"] or 0.0) >= KERNEL_SHARE * abs(moved)]
            if inside:
                continue
        if c["kind"] == "kernel" and any(x["kind"] == "kernel" and x["name"] == c["name"] for x in chosen):
            continue
        chosen.append(c)
    return chosen


def item_text(c: Candidate, hardware: str | None) -> str:
    if c["change_pct"] is None and (c["delta_ns"] or 0) > 0:
        # none on BASE: no percentage or interval to give, only what NEW added
        what = f"{c['label']}, none in BASE's steps, {signed_dur(c['delta_ns'])} per step in NEW's"
    else:
        what = f"{c['label']} {pct(c['change_pct'])} {c['measure']} ({interval(c['low_pct'], c['high_pct'])})"
        what += f", {signed_dur(c['delta_ns'])} per step"
    if hardware and c["kind"] in ("kernel", "category"):
        what += f", with the GPU change ({hardware})"
    return what


def step_text(r: ChangeRow | None, reason: str | None) -> str:
    if r is None or r["status"] != "ok":
        return f"Step time not compared ({reason or (r['reason'] if r is not None else None)})"
    sizes = f"median {fmt.dur(r['base_median'])} to {fmt.dur(r['new_median'])}, {r['n_base']} vs {r['n_new']} steps"
    if r["low_pct"] is None:
        return f"Step time {pct(r['change_pct'])} (no 95% interval with {r['n_base']} vs {r['n_new']} steps; {sizes})"
    if not r["beyond_noise"]:
        return f"Step time within the noise: {pct(r['change_pct'])} ({interval(r['low_pct'], r['high_pct'])}; {sizes})"
    return f"Step time {pct(r['change_pct'])} ({interval(r['low_pct'], r['high_pct'])}; {sizes})"


def build(comp: Comparability, step_rows: list[ChangeRow], categories: list[CategoryChangeRow],
          kernel_rows: list[KernelRow], label: Callable[[str | None], str], in_step_reason: str | None,
          hardware: str | None) -> Headline:
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
