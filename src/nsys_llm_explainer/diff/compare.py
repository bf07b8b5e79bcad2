"""Assemble diff.json from two report.json dicts (never from the traces directly)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nsys_llm_explainer import TOOL_NAME, __version__
from nsys_llm_explainer.diff import categories, findings, gate, headline, kernels, steps
from nsys_llm_explainer.diff.basis import choose, window_ns
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.render.json_writer import plain
from nsys_llm_explainer.trace.formats import source_text

SCHEMA_VERSION = "1.0"


@dataclass(frozen=True)
class Diff:
    doc: dict[str, Any]  # diff.json content
    kernel_rows: pd.DataFrame | None  # tables/diff_kernels.csv rows


def _side_info(side: Side, steps_found: dict[str, steps.PhaseSteps] | str) -> dict[str, Any]:
    t = side.doc.get("trace", {})
    return {
        "input": side.label,
        "kind": side.kind,
        "report_tool_version": side.doc.get("tool", {}).get("version"),
        "nsys_version": t.get("nsys_version"),
        "source": source_text(t),
        "window_ns": window_ns(side),
        "steps": steps.total_steps(steps_found),
        "devices": [g.get("device_id") for g in t.get("gpus", []) if isinstance(g, dict)],
    }


def _max_change(rows: list[dict[str, Any]], key: str) -> gate.GateValue:
    values = [r[key] for r in rows if r[key] is not None]
    return (max(values), None) if values else (None, "no phase has a finite change")


def _gate_values(
    head: dict[str, float | str], st: dict[str, Any], kern: dict[str, Any], found: dict[str, Any]
) -> dict[str, gate.GateValue]:
    def num(key: str) -> gate.GateValue:
        v = head[key]
        return (None, v) if isinstance(v, str) else (v, None)

    out: dict[str, gate.GateValue] = {
        f"{k}_pct": num(k)
        for k in ("kernel_time", "gpu_busy", "gpu_idle", "launches", "launch_calls", "sync_time")
    }
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


def _warnings(base: Side, new: Side, kern: dict[str, Any]) -> list[str]:
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


def _guarded(
    name: str, empty: dict[str, Any], fn: Callable[..., dict[str, Any]], *args: Any
) -> dict[str, Any]:
    """A section, or not_compared when a hand-edited or older report lacks fields it reads."""
    try:
        return fn(*args)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = f"a report lacks fields the {name} comparison reads ({type(exc).__name__}: {exc})"
        return {"status": "not_compared", "reason": reason, **empty}


def compare(base: Side, new: Side, conditions: tuple[gate.Condition, ...] = ()) -> Diff:
    sb, sn = steps.read(base), steps.read(new)
    basis = choose(base, new, steps.total_steps(sb), steps.total_steps(sn))
    head_rows, head_changes = headline.headline(base, new, basis)
    st = steps.compare(base, new, sb, sn)
    kern = _guarded(
        "kernel", {"rows": [], "counts": {}, "frame": None}, kernels.compare, base, new, basis
    )
    found = findings.compare(base, new)
    values = _gate_values(head_changes, st, kern, found)
    frame = kern.pop("frame")
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "base": _side_info(base, sb),
        "new": _side_info(new, sn),
        "basis": basis.to_json(),
        "headline": head_rows,
        "devices": _guarded("GPU", {"rows": []}, headline.devices, base, new, basis),
        "steps": st,
        "kernels": kern,
        "categories": _guarded("category", {"rows": []}, categories.compare, base, new, basis),
        "findings": found,
        "gate_values": {
            k: {"value": gate.json_number(v), "reason": why} for k, (v, why) in values.items()
        },
        "gate": gate.evaluate(conditions, values),
        "warnings": _warnings(base, new, kern),
    }
    return Diff(plain(doc), frame)
