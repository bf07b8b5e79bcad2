"""`--fail-on` expressions: `METRIC OP NUMBER`, evaluated against diff.json's gate values,
and the bare condition `incomparable` (the captures cannot be compared: diff.json
comparability.comparable is false).

Values ending in `_pct` are relative changes in percent: per complete step for the step,
kernel and host time, and for launches and GPU busy time when both captures have complete
steps (the Hodges-Lehmann estimates of diff.json `in_step`); whole-capture totals as measured
otherwise (never scaled per second of captured window); `_pp` values are changes in
percentage points; the others are counts.

A gate never passes on captures the diff calls not comparable: any gate on such a pair fails
(its conditions are still evaluated and listed), unless allow_incomparable is set
(--allow-incomparable). A gate none of whose conditions could be evaluated fails (it checked
nothing), unless allow_unevaluated is set (--allow-unevaluated).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from typing import Literal, TypedDict

from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.frozen import frozen

INCOMPARABLE = "incomparable"
GATE_METRICS: dict[str, str] = {
    INCOMPARABLE: "the captures cannot be compared (different GPUs, jobs, programs or step definitions); "
    "a bare condition: --fail-on incomparable",
    "step_time_pct": "change of step time, all complete steps (%, Hodges-Lehmann)",
    "step_p50_pct": "largest change of median step latency over the phases compared (%)",
    "step_p90_pct": "largest change of p90 step latency over the phases compared (%)",
    "kernel_time_pct": "change of kernel time per complete step, from the kernels inside steps (%)",
    "host_time_pct": "change of host time outside CUDA calls per complete step (%)",
    "gpu_busy_pct": "change of GPU busy time: per complete step when both captures have steps, else all devices, "
    "whole capture as measured (%)",
    "gpu_idle_pct": "change of GPU idle time, all devices, whole capture as measured (%)",
    "launches_pct": "change of the number of kernels launched: per complete step when both captures have steps, "
    "else whole capture as measured (%)",
    "launch_calls_pct": "change of the number of launch API calls, graph launches included, whole capture as "
    "measured (%)",
    "sync_time_pct": "change of blocking synchronization time, whole capture as measured (%)",
    "nvtx_coverage_pp": "change of NVTX coverage of kernel time (percentage points)",
    "new_findings": "rule ids that fire on NEW but not on BASE",
    "new_high_findings": "rule ids with a high-severity finding on NEW but not on BASE",
    "new_kernels": "kernels present only in NEW (after name normalization)",
    "vanished_kernels": "kernels present only in BASE (after name normalization)",
}
OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}
_EXPR = re.compile(r"^\s*([a-z0-9_]+)\s*(>=|<=|==|>|<)\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+))\s*%?\s*$")


GateValue = tuple[float | None, str | None]  # (value, why it is unknown)


@frozen
class Condition:
    text: str
    metric: str
    op: str
    threshold: float

    def holds(self, value: float) -> bool:
        return OPS[self.op](value, self.threshold)


def _usage(expr: str, why: str) -> UsageError:
    return UsageError(
        f"--fail-on {expr!r}: {why}; expected {INCOMPARABLE} or METRIC OP NUMBER with OP one of "
        f"> >= < <= == and METRIC one of {', '.join(m for m in GATE_METRICS if m != INCOMPARABLE)}"
    )


def parse(values: Iterable[str] | None) -> tuple[Condition, ...]:
    """Parse repeatable, comma-separated expressions; UsageError names the valid metrics."""
    out: list[Condition] = []
    for value in values or ():
        for part in value.split(","):
            if not part.strip():
                continue
            if part.strip().lower() == INCOMPARABLE:
                out.append(Condition(INCOMPARABLE, INCOMPARABLE, "==", 1.0))
                continue
            m = _EXPR.match(part.lower())
            if m is None:
                raise _usage(part.strip(), "cannot parse it")
            metric, op, number = m.groups()
            if metric not in GATE_METRICS:
                raise _usage(part.strip(), f"unknown metric {metric!r}")
            if metric == INCOMPARABLE:
                raise _usage(part.strip(), f"{INCOMPARABLE} takes no operator or number")
            out.append(Condition(" ".join(part.split()), metric, op, float(number)))
    return tuple(out)


class ConditionDoc(TypedDict):
    """diff.json `gate.conditions`: one --fail-on condition and what it found."""

    expression: str
    metric: str
    op: str
    threshold: float
    value: float | str | None  # infinite changes as "inf" / "-inf"
    status: Literal["tripped", "passed", "not_evaluated"]
    reason: str | None


class GateDoc(TypedDict):
    """diff.json `gate`."""

    conditions: list[ConditionDoc]
    allow_unevaluated: bool
    unevaluated: bool
    allow_incomparable: bool
    incomparable: bool
    incomparable_reasons: list[str]
    tripped: bool


def evaluate(
    conditions: tuple[Condition, ...], values: dict[str, GateValue], allow_unevaluated: bool = False,
    incomparable: tuple[str, ...] = (), allow_incomparable: bool = False,
) -> GateDoc:
    """diff.json `gate`: each condition tripped, passed or not evaluated (value unknown); the
    gate trips when a condition does, when none could be evaluated (unless allowed), or, when
    there is any condition, when the captures are not comparable (`incomparable`: the reasons;
    unless allowed): a gate must not pass on a pair the diff itself calls not comparable."""
    results: list[ConditionDoc] = []
    for c in conditions:
        value, why = values.get(c.metric, (None, "the value is unknown"))
        status: Literal["tripped", "passed", "not_evaluated"]
        if value is None:
            status, reason = "not_evaluated", why
        else:
            status, reason = ("tripped" if c.holds(float(value)) else "passed"), None
        results.append(
            {
                "expression": c.text,
                "metric": c.metric,
                "op": c.op,
                "threshold": c.threshold,
                "value": json_number(value),
                "status": status,
                "reason": reason,
            }
        )
    none = bool(results) and all(r["status"] == "not_evaluated" for r in results)
    refused = bool(results) and bool(incomparable) and not allow_incomparable
    return {
        "conditions": results,
        "allow_unevaluated": allow_unevaluated,
        "unevaluated": none,
        "allow_incomparable": allow_incomparable,
        "incomparable": refused,
        "incomparable_reasons": list(incomparable) if results else [],
        "tripped": (any(r["status"] == "tripped" for r in results) or (none and not allow_unevaluated)
                    or refused),
    }


def json_number(value: float | None) -> float | str | None:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value
