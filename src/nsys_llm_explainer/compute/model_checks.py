"""Plausibility of model_utilization's figures: warnings that name the inputs to check.

- Above the roof: no GPU computes faster than its dense peak or reads faster than its memory
  bandwidth, so an MFU, MBU or HFU above 100% x (1 + UTILIZATION_TOLERANCE) (the phase's, or
  its highest step's) means an input is wrong: tokens per step, FLOPs per token or bytes per
  step, the peak (the GPU model, or the dtype its peak class came from) or the GPU count.
  When the peak was assumed from kernel names (the export names no GPU), the warning says so:
  a newer GPU than the assumed one has higher peaks.
- HFU below MFU: the operators measured in a step compute at least the model's FLOPs (the
  hardware does the model's work, plus recomputation and padding), once their shapes cover
  the step (counted calls hold at least MIN_COVERAGE of the kernel time its operator calls
  launched). Measured FLOPs below the model's by more than the tolerance (both count causal
  attention half, as the kernels run it) mean the model FLOPs count work the steps did not run.

UTILIZATION_TOLERANCE is the operator roofline's PLAUSIBLE_TOLERANCE (10%): more than clock
boost or timer granularity can explain.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.compute.model_steps import StepContext
from nsys_llm_explainer.compute.peaks import PLAUSIBLE_TOLERANCE

UTILIZATION_TOLERANCE = PLAUSIBLE_TOLERANCE
MIN_COVERAGE = 0.9
CEILING_PCT = 100.0 * (1 + UTILIZATION_TOLERANCE)


def _figure(phase: dict[str, Any], steps: list[dict[str, Any]], key: str) -> tuple[float, str] | None:
    """The highest of the phase's figure and its steps', and how to say it."""
    values = [float(s[key]) for s in steps if s.get(key) is not None]
    whole = float(phase[key]) if phase.get(key) is not None else None
    top = max(values, default=whole if whole is not None else float("nan"))
    if whole is None:
        return (top, f"up to {top:,.1f}% in its steps") if values else None
    if top > whole:
        return top, f"{whole:,.1f}% (steps up to {top:,.1f}%)"
    return whole, f"{whole:,.1f}%"


def _assumed(sc: StepContext, steps: list[dict[str, Any]]) -> str:
    notes = sorted({sc.per_pid[s["pid"]].assumed for s in steps if s["pid"] in sc.per_pid} - {""})
    if not notes:
        return ""
    return f"; the figures use assumed {notes[0]}"


def _ceiling(phase: dict[str, Any], steps: list[dict[str, Any]], sc: StepContext) -> list[str]:
    out = []
    first = steps[0]
    gpus = f"the GPU count ({phase['gpus']} per step)"
    peak = f"the {sc.cls} dense peak ({first['peak_tflops']} TFLOP/s per GPU)"
    bandwidth = f"the memory bandwidth ({first['bandwidth_gbps']} GB/s per GPU)"
    checks = (
        ("MFU", "mfu_pct", f"tokens per step ({first['tokens_from']}), FLOPs per token "
                           f"({first['flops_from']}), {peak} or {gpus}"),
        ("MBU", "mbu_pct", f"bytes per step ({first['bytes_from']}), {bandwidth} or {gpus}"),
        ("HFU", "hfu_pct", f"the recorded operator shapes or dtypes (measured FLOPs), {peak} or {gpus}"),
    )
    for name, key, inputs in checks:
        fig = _figure(phase, steps, key)
        if fig is None or not fig[0] > CEILING_PCT:
            continue
        out.append(
            f"phase {phase['phase']!r}: {name} {fig[1]} is above 100% by more than the "
            f"{UTILIZATION_TOLERANCE:.0%} tolerance, which no GPU can reach: check {inputs}"
            f"{_assumed(sc, steps)}"
        )
    return out


def _below_model(phase: dict[str, Any], steps: list[dict[str, Any]]) -> list[str]:
    covered = [s for s in steps if s.get("measured_flops") and s.get("floor_flops")
               and s["launched_ns"] and s["covered_ns"] >= MIN_COVERAGE * s["launched_ns"]]
    if not covered:
        return []
    measured = sum(float(s["measured_flops"]) for s in covered)
    floor = sum(float(s["floor_flops"]) for s in covered)
    if measured >= (1 - UTILIZATION_TOLERANCE) * floor:
        return []
    share = sum(s["covered_ns"] for s in covered) / sum(s["launched_ns"] for s in covered)
    hfu, mfu = phase.get("hfu_pct"), phase.get("mfu_pct")
    figures = f"HFU {hfu:.1f}% below MFU {mfu:.1f}%" if hfu is not None and mfu is not None else "HFU below MFU"
    return [
        f"phase {phase['phase']!r}: {figures} is inconsistent: its operators with shapes cover "
        f"{100 * share:.0f}% of the kernel time its steps launched and compute "
        f"{measured / 1e9:,.1f} GFLOP, {100 * (1 - measured / floor):.0f}% less than the model's "
        f"{floor / 1e9:,.1f} GFLOP (causal attention counted half in both), so the model FLOPs count work the "
        "steps did not run: check the tokens per step, the FLOPs per token or the model config "
        "(a module the traced code does not run, such as the LM head)"
    ]


def phase_warnings(phase: dict[str, Any], steps: list[dict[str, Any]], sc: StepContext) -> list[str]:
    """The warnings of one phase, from its row and its steps' rows (with the check keys)."""
    if not steps:
        return []
    return _ceiling(phase, steps, sc) + _below_model(phase, steps)
