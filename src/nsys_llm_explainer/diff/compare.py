"""Assemble diff.json from two report.json dicts (never from the traces directly).

Order of reasoning: first whether the captures can be compared (comparability.py), then the
per-step changes from the work inside complete steps with their intervals (in_step.py), the
headline that leads with the largest change beyond the noise (diff/comparability.py), then the per-phase
step times, kernels (per step, else per call), categories, the critical path's composition
(totals.py), findings (below) and whole-capture totals as measured (load.py: nothing is
divided by the captured window). A gate never passes on captures that are not comparable.

Findings (compare_findings): those that appeared, were resolved, or persisted between the
two reports, by rule id, judged by the GPU time at stake, not by severity bands.

A rule's impact on a side is the sum of its findings' impact_pct (GPU time at stake as a share
of the affected devices' windows: already normalized for captures of different length).
It counts as appeared when NEW's impact exceeds BASE's (0 when absent) by more than the noise
band, as resolved when BASE's exceeds NEW's by more than the band, else as persisting, even
when a severity band boundary was crossed. The band is the larger of NOISE_PP percentage
points and NOISE_REL of the larger impact. Notes without time at stake (severity info) appear
or disappear by presence.

A rule that fired on one side only is not a change when the other side could not measure it:
a metric the rule reads (its findings' metric_ids) ran on the side where it fired and was
skipped (or is absent) on the other. Such rules are listed as `not_measured_new` (fired on
BASE, not measured on NEW) or `not_measured_base`, never as resolved or appeared. When the GPU
model changed (comparability), every appeared, resolved or persisting rule carries
`hardware_changed: true`: it may have moved with the hardware, not with the program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NotRequired, TypedDict, TypeVar

import pandas as pd

from nsys_llm_explainer.about import TOOL_NAME, __version__
from nsys_llm_explainer.diff import comparability, gate, in_step, kernels, totals
from nsys_llm_explainer.diff.kernels import NAME_SEP
from nsys_llm_explainer.diff.load import BasisDoc, DistributedDoc, Side, ToolDoc, choose, window_ns
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.kernels.labels import Labels
from nsys_llm_explainer.render.json_writer import plain
from nsys_llm_explainer.trace.formats import source_text

SCHEMA_VERSION = "3.0"


class Carried(TypedDict):
    """diff.json `base.carried` / `new.carried`: work queued before the capture."""

    kernels: int
    kernel_ns: int | None
    busy_ns: int | None


class SideInfo(TypedDict):
    """diff.json `base` / `new`: what each side is."""

    input: str
    kind: str
    report_tool_version: str | None
    nsys_version: str | None
    source: str
    versions: str
    window_ns: int | None
    steps: int | None
    complete_steps: int | None
    carried: Carried | None
    steps_method: str | None
    kernels_per_step: float | None
    devices: list[int | None]
    gpus: list[str] | None
    world: DistributedDoc | None


class InStepSection(TypedDict):
    """diff.json `in_step`: the per-step changes (their summary only when compared)."""

    status: Literal["ok", "not_compared"]
    reason: str | None
    level: NotRequired[float]
    method: NotRequired[str]
    base_steps: NotRequired[int]
    new_steps: NotRequired[int]
    base_series_steps: NotRequired[int]
    new_series_steps: NotRequired[int]
    base_outside_ns: NotRequired[int]
    new_outside_ns: NotRequired[int]
    base_outside_kernels: NotRequired[int]
    new_outside_kernels: NotRequired[int]
    base_carried_kernels: NotRequired[int | None]
    base_carried_ns: NotRequired[int | None]
    new_carried_kernels: NotRequired[int | None]
    new_carried_ns: NotRequired[int | None]
    rows: list[in_step.ChangeRow]
    categories: list[in_step.CategoryChangeRow]


class RuleEntry(TypedDict):
    """A rule's findings on one side (by_rule)."""

    rule_id: str
    severity: str
    count: int
    titles: list[str]
    impact_pct: float | None  # summed; None: notes without time at stake


class ChangedRule(RuleEntry):
    """diff.json `findings.appeared` / `.disappeared`."""

    base_impact_pct: float | None
    new_impact_pct: float | None
    hardware_changed: bool


class UnmeasuredRule(RuleEntry):
    """diff.json `findings.not_measured_new` / `.not_measured_base`."""

    base_impact_pct: float | None
    new_impact_pct: float | None
    unmeasured: list[str]
    reason: str


class PersistingRule(TypedDict):
    """diff.json `findings.persisting`."""

    hardware_changed: bool
    rule_id: str
    base_severity: str
    new_severity: str
    base_count: int
    new_count: int
    base_impact_pct: float | None
    new_impact_pct: float | None
    titles: list[str]


class Noise(TypedDict):
    pp: float
    relative: float


class FindingsSection(TypedDict):
    """diff.json `findings`."""

    noise: Noise
    hardware: str | None
    appeared: list[ChangedRule]
    disappeared: list[ChangedRule]
    persisting: list[PersistingRule]
    not_measured_new: list[UnmeasuredRule]
    not_measured_base: list[UnmeasuredRule]
    new_high: list[str]


class GateValueDoc(TypedDict):
    """diff.json `gate_values`: a value --fail-on can test, or why it is unknown."""

    value: float | str | None
    reason: str | None
    basis: str


class DiffDoc(TypedDict):
    """diff.json."""

    schema_version: str
    tool: ToolDoc
    comparability: comparability.ComparabilityDoc
    headline: comparability.Headline
    base: SideInfo
    new: SideInfo
    in_step: InStepSection
    steps: in_step.StepsSection
    kernels: kernels.KernelsSection
    categories: totals.CategoriesSection
    critical_path: totals.CriticalPathSection
    findings: FindingsSection
    basis: BasisDoc
    totals: list[totals.TotalRow]
    devices: totals.DevicesSection
    gate_values: dict[str, GateValueDoc]
    gate: gate.GateDoc
    warnings: list[str]


@frozen
class Diff:
    doc: DiffDoc  # diff.json content
    kernel_rows: pd.DataFrame | None  # tables/diff_kernels.csv rows


def _side_info(side: Side, steps_found: dict[str, in_step.PhaseSteps] | str) -> SideInfo:
    t = side.doc.get("trace", {})
    method, per_step = comparability.step_definition(side)
    return {
        "input": side.label,
        "kind": side.kind,
        "report_tool_version": side.doc.get("tool", {}).get("version"),
        "nsys_version": t.get("nsys_version"),
        "source": source_text({"format": t.get("format"), "kineto": t.get("kineto"),
                               "nsys_version": t.get("nsys_version"),
                               "export_schema_version": t.get("export_schema_version")}),
        "versions": comparability.versions(side),
        "window_ns": window_ns(side),
        "steps": in_step.total_steps(steps_found),
        "complete_steps": comparability.complete_steps(side),
        "carried": carried(side),
        "steps_method": method,
        "kernels_per_step": None if per_step is None else round(per_step, 2),
        "devices": [g.get("device_id") for g in t.get("gpus", []) if isinstance(g, dict)],
        "gpus": comparability.used_gpus(side),
        "world": comparability.world(side),
    }


def carried(side: Side) -> Carried | None:
    """Work queued before the capture (metrics.steps.carried): in no step, counted apart."""
    c = (side.metric("steps") or {}).get("carried")
    if not isinstance(c, dict) or not isinstance(c.get("kernels"), int):
        return None
    return {"kernels": c["kernels"], "kernel_ns": c.get("kernel_ns"), "busy_ns": c.get("busy_ns")}


def _max_change(rows: list[in_step.PhaseRow], key: Literal["p50_delta_pct", "p90_delta_pct"]) -> gate.GateValue:
    values = [v for r in rows if (v := r[key]) is not None]
    return (max(values), None) if values else (None, "no phase has a finite change")


def _step_value(rows: list[in_step.ChangeRow], row_id: str, reason: str | None) -> gate.GateValue:
    r = next((x for x in rows if x["id"] == row_id), None)
    if r is None or r["status"] != "ok" or (change := r["change_pct"]) is None:
        return None, reason or (r["reason"] if r is not None else None) or "not measured"
    return float(change), None


PER_STEP_GATES = frozenset({"step_time_pct", "kernel_time_pct", "host_time_pct"})
WHOLE_CAPTURE_GATES = frozenset({"gpu_busy_pct", "gpu_idle_pct", "launches_pct", "launch_calls_pct",
                                 "sync_time_pct", "nvtx_coverage_pp"})


def _gate_values(
    head: dict[str, float | str], st: in_step.StepsSection, kern: kernels.KernelsSection, found: FindingsSection,
    step_rows: list[in_step.ChangeRow], in_step_reason: str | None, comp: comparability.Comparability,
    per_step: set[str],
) -> dict[str, gate.GateValue]:
    """Every gate value; `per_step` receives the whole-capture ones computed per step instead."""
    def num(key: str) -> gate.GateValue:
        v = head[key]
        return (None, v) if isinstance(v, str) else (v, None)

    out: dict[str, gate.GateValue] = {
        f"{k}_pct": num(k) for k in ("gpu_busy", "gpu_idle", "launches", "launch_calls", "sync_time")
    }
    if in_step_reason is None:  # both have complete steps: these two per step where computed
        for key, row_id in (("gpu_busy_pct", "gpu_busy"), ("launches_pct", "kernels")):
            value = _step_value(step_rows, row_id, None)
            if value[0] is not None:
                out[key] = value
                per_step.add(key)
    out[gate.INCOMPARABLE] = (0.0 if comp.comparable else 1.0, None)
    out["step_time_pct"] = _step_value(step_rows, "step_time", in_step_reason)
    out["kernel_time_pct"] = _step_value(step_rows, "kernel_time", in_step_reason)
    out["host_time_pct"] = _step_value(step_rows, "host_time", in_step_reason)
    out["nvtx_coverage_pp"] = num("nvtx_coverage")
    if st["status"] == "ok":
        out["step_p50_pct"] = _max_change(st["phases"], "p50_delta_pct")
        out["step_p90_pct"] = _max_change(st["phases"], "p90_delta_pct")
    else:
        out["step_p50_pct"] = out["step_p90_pct"] = (None, st["reason"])
    if kern["status"] == "ok":
        out["new_kernels"] = (float(kern["counts"]["new"]), None)
        out["vanished_kernels"] = (float(kern["counts"]["vanished"]), None)
    else:
        out["new_kernels"] = out["vanished_kernels"] = (None, kern["reason"])
    out["new_findings"] = (float(len(found["appeared"])), None)
    out["new_high_findings"] = (float(len(found["new_high"])), None)
    return out


def _gate_basis(key: str, stepped: set[str]) -> str:
    """What a gate value is computed on: per complete step, the whole capture as measured, the
    step latency per phase, or a count."""
    if key in PER_STEP_GATES or key in stepped:
        return "per_step"
    if key in WHOLE_CAPTURE_GATES:
        return "whole_capture"
    return "per_phase" if key.startswith("step_p") else "count"


def _warnings(base: Side, new: Side, kern: kernels.KernelsSection) -> list[str]:
    out = []
    modes = kern.get("name_modes") or [None, None]
    if modes[0] != modes[1]:
        out.append(
            f"kernel names are {modes[0]} on BASE and {modes[1]} on NEW: few kernels will match; "
            "write both reports with the same --kernel-name"
        )
    for side, which in ((base, "BASE"), (new, "NEW")):
        version = side.doc.get("tool", {}).get("version")
        if version != __version__:
            out.append(
                f"{which} report was written by {TOOL_NAME} {version}; this is {__version__}"
            )
    return out


Section = TypeVar("Section")


def _guarded(name: str, fn: Callable[[], Section], empty: Callable[[str], Section]) -> Section:
    """A section, or `empty` (not_compared, with the reason) when a hand-edited or older report
    lacks fields it reads."""
    try:
        return fn()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return empty(f"a report lacks fields the {name} comparison reads ({type(exc).__name__}: {exc})")


def _work(side: Side) -> in_step.Work | str:
    try:
        return in_step.read(side)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"{side.role}: metrics.step_work lacks fields the per-step comparison reads ({exc})"


def _in_step(wb: in_step.Work | str, wn: in_step.Work | str, base: Side, new: Side) -> InStepSection:
    if isinstance(wb, str) or isinstance(wn, str):
        reason = wb if isinstance(wb, str) else str(wn)
        return {"status": "not_compared", "reason": reason, "rows": [], "categories": []}
    cb, cn = carried(base), carried(new)
    return {"status": "ok", "reason": None, **in_step.summary(wb, wn),
            "base_carried_kernels": cb["kernels"] if cb else None,
            "base_carried_ns": cb["kernel_ns"] if cb else None,
            "new_carried_kernels": cn["kernels"] if cn else None,
            "new_carried_ns": cn["kernel_ns"] if cn else None,
            "rows": in_step.step_rows(wb, wn), "categories": in_step.category_rows(wb, wn)}


def labels_of(kern: kernels.KernelsSection) -> Labels:
    """Labels over the kernel names of both sides, so no two rows look alike."""
    names: set[str] = set()
    for r in kern.get("rows", []):
        for name in (r.get("base_name"), r.get("new_name")):
            if isinstance(name, str):
                names.update(name.split(NAME_SEP))
    return Labels(names)


def compare(
    base: Side, new: Side, conditions: tuple[gate.Condition, ...] = (), allow_unevaluated: bool = False,
    allow_incomparable: bool = False,
) -> Diff:
    sb, sn = in_step.read_steps(base), in_step.read_steps(new)
    wb, wn = _work(base), _work(new)
    basis = choose(base, new, isinstance(wb, in_step.Work) and isinstance(wn, in_step.Work))
    total_rows, total_changes = totals.totals(base, new)
    kern, frame = _guarded("kernel", lambda: kernels.compare(base, new, wb, wn),
                           lambda why: (kernels.not_compared(why), None))
    comp = comparability.check(base, new, kern)
    gpus = comp.check("gpus")
    hardware = f"from {gpus.base} to {gpus.new}" if gpus is not None and comp.hardware_changed else None
    st = in_step.compare_steps(base, new, sb, sn, wb, wn)
    per_step = _in_step(wb, wn, base, new)
    found = compare_findings(base, new, hardware)
    head = comparability.build(comp, per_step["rows"], per_step["categories"], kern.get("rows", []),
                      labels_of(kern), per_step["reason"], hardware)
    stepped: set[str] = set()
    values = _gate_values(total_changes, st, kern, found, per_step["rows"], per_step["reason"], comp, stepped)
    doc: DiffDoc = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "comparability": comp.to_json(),
        "headline": head,
        "base": _side_info(base, sb),
        "new": _side_info(new, sn),
        "in_step": per_step,
        "steps": st,
        "kernels": kern,
        "categories": _guarded("category", lambda: totals.compare(base, new), totals.categories_not_compared),
        "critical_path": _guarded("critical path", lambda: totals.compare_critical_path(base, new),
                                  totals.path_not_compared),
        "findings": found,
        "basis": basis.to_json(),
        "totals": total_rows,
        "devices": _guarded("GPU", lambda: totals.devices(base, new), totals.devices_not_compared),
        "gate_values": {
            k: {"value": gate.json_number(v), "reason": why, "basis": _gate_basis(k, stepped)}
            for k, (v, why) in values.items()
        },
        "gate": gate.evaluate(conditions, values, allow_unevaluated, tuple(comp.reasons), allow_incomparable),
        "warnings": _warnings(base, new, kern),
    }
    return Diff(plain(doc), frame)


SEVERITY_RANK = {"high": 0, "medium": 1, "low": 2, "info": 3}
NOISE_PP = 1.0
NOISE_REL = 0.25


def by_rule(side: Side) -> dict[str, RuleEntry]:
    """rule id -> worst severity, finding count, titles and summed impact_pct (None: notes)."""
    out: dict[str, RuleEntry] = {}
    findings = side.doc.get("findings")
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, dict) or not isinstance(f.get("rule_id"), str):
            continue
        sev = str(f.get("severity")) if f.get("severity") in SEVERITY_RANK else "low"
        entry = out.setdefault(
            f["rule_id"],
            {"rule_id": f["rule_id"], "severity": sev, "count": 0, "titles": [], "impact_pct": None},
        )
        entry["count"] += 1
        entry["titles"].append(str(f.get("title", "")))
        if SEVERITY_RANK[sev] < SEVERITY_RANK[entry["severity"]]:
            entry["severity"] = sev
        pct = f.get("impact_pct")
        if isinstance(pct, int | float) and not isinstance(pct, bool):
            entry["impact_pct"] = round((entry["impact_pct"] or 0.0) + float(pct), 4)
    return out


def noise_band(a: float, b: float) -> float:
    return max(NOISE_PP, NOISE_REL * max(a, b))


def _impact(entry: RuleEntry | None) -> float | None:
    return entry["impact_pct"] if entry else None


def _change(b: RuleEntry | None, n: RuleEntry | None) -> str:
    """'appeared', 'resolved' or 'persisting'."""
    bi, ni = _impact(b), _impact(n)
    if bi is None and ni is None:  # notes: by presence
        return "appeared" if b is None else "resolved" if n is None else "persisting"
    bv, nv = bi or 0.0, ni or 0.0
    if nv - bv > noise_band(bv, nv):
        return "appeared"
    if bv - nv > noise_band(bv, nv):
        return "resolved"
    return "persisting"


def metrics_of(side: Side) -> dict[str, list[str]]:
    """rule id -> the metric ids its findings read."""
    out: dict[str, list[str]] = {}
    findings = side.doc.get("findings")
    for f in findings if isinstance(findings, list) else []:
        if isinstance(f, dict) and isinstance(f.get("rule_id"), str):
            ids = out.setdefault(f["rule_id"], [])
            ids += [m for m in f.get("metric_ids") or [] if isinstance(m, str) and m not in ids]
    return out


def _unmeasured(rule_metrics: list[str], fired: Side, other: Side) -> list[str]:
    """The metrics the rule read that ran where it fired and did not run on the other side."""
    return [m for m in rule_metrics if fired.metric(m) is not None and other.metric(m) is None]


def compare_findings(base: Side, new: Side, hardware: str | None = None) -> FindingsSection:
    """`hardware`: how the GPUs changed (comparability), when they did."""
    fb, fn = by_rule(base), by_rule(new)
    mb, mn = metrics_of(base), metrics_of(new)
    appeared: list[ChangedRule] = []
    resolved: list[ChangedRule] = []
    persisting: list[PersistingRule] = []
    gone_new: list[UnmeasuredRule] = []
    gone_base: list[UnmeasuredRule] = []
    for r in sorted(set(fb) | set(fn)):
        b, n = fb.get(r), fn.get(r)
        kind = _change(b, n)
        bi, ni = _impact(b), _impact(n)
        if b is not None and n is None and (why := _unmeasured(mb.get(r, []), base, new)):
            gone_new.append({**b, "base_impact_pct": bi, "new_impact_pct": ni, "unmeasured": why,
                             "reason": "; ".join(new.why_missing(m) for m in why)})
            continue
        if n is not None and b is None and (why := _unmeasured(mn.get(r, []), new, base)):
            gone_base.append({**n, "base_impact_pct": bi, "new_impact_pct": ni, "unmeasured": why,
                              "reason": "; ".join(base.why_missing(m) for m in why)})
            continue
        changed = hardware is not None
        entry = (n or b) if kind == "appeared" else (b or n)  # r fired on one side at least
        if kind in ("appeared", "resolved") and entry is not None:
            (appeared if kind == "appeared" else resolved).append(
                {**entry, "base_impact_pct": bi, "new_impact_pct": ni, "hardware_changed": changed})
        elif b is not None and n is not None:
            persisting.append({
                "hardware_changed": changed,
                "rule_id": r,
                "base_severity": b["severity"],
                "new_severity": n["severity"],
                "base_count": b["count"],
                "new_count": n["count"],
                "base_impact_pct": b["impact_pct"],
                "new_impact_pct": n["impact_pct"],
                "titles": n["titles"],
            })
    return {
        "noise": {"pp": NOISE_PP, "relative": NOISE_REL},
        "hardware": hardware,
        "appeared": appeared,
        "disappeared": resolved,
        "persisting": persisting,
        "not_measured_new": gone_new,
        "not_measured_base": gone_base,
        # high on NEW and its time at stake grew beyond the noise (new, or worse)
        "new_high": sorted(f["rule_id"] for f in appeared
                           if (e := fn.get(f["rule_id"])) is not None and e["severity"] == "high"),
    }
