"""`--fail-on` expressions: `METRIC OP NUMBER`, evaluated against diff.json's gate values.

Values ending in `_pct` are relative changes in percent on the comparison basis (per step,
per second or total); `_pp` values are changes in percentage points; the others are counts.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from nsys_llm_explainer.errors import UsageError

GATE_METRICS: dict[str, str] = {
    "step_p50_pct": "largest change of median step latency over the phases compared (%)",
    "step_p90_pct": "largest change of p90 step latency over the phases compared (%)",
    "kernel_time_pct": "change of total kernel time (%)",
    "gpu_busy_pct": "change of GPU busy time, all devices (%)",
    "gpu_idle_pct": "change of GPU idle time, all devices (%)",
    "launches_pct": "change of the number of kernels launched (%)",
    "launch_calls_pct": "change of the number of launch API calls, graph launches included (%)",
    "sync_time_pct": "change of blocking synchronization time (%)",
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


@dataclass(frozen=True)
class Condition:
    text: str
    metric: str
    op: str
    threshold: float

    def holds(self, value: float) -> bool:
        return OPS[self.op](value, self.threshold)


def _usage(expr: str, why: str) -> UsageError:
    return UsageError(
        f"--fail-on {expr!r}: {why}; expected METRIC OP NUMBER with OP one of > >= < <= == "
        f"and METRIC one of {', '.join(GATE_METRICS)}"
    )


def parse(values: Iterable[str] | None) -> tuple[Condition, ...]:
    """Parse repeatable, comma-separated expressions; UsageError names the valid metrics."""
    out: list[Condition] = []
    for value in values or ():
        for part in value.split(","):
            if not part.strip():
                continue
            m = _EXPR.match(part.lower())
            if m is None:
                raise _usage(part.strip(), "cannot parse it")
            metric, op, number = m.groups()
            if metric not in GATE_METRICS:
                raise _usage(part.strip(), f"unknown metric {metric!r}")
            out.append(Condition(" ".join(part.split()), metric, op, float(number)))
    return tuple(out)


def evaluate(conditions: tuple[Condition, ...], values: dict[str, GateValue]) -> dict[str, Any]:
    """diff.json `gate`: each condition tripped, passed or not evaluated (value unknown)."""
    results = []
    for c in conditions:
        value, why = values.get(c.metric, (None, "the value is unknown"))
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
    return {"conditions": results, "tripped": any(r["status"] == "tripped" for r in results)}


def json_number(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value
