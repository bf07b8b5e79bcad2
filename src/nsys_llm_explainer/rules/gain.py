"""Estimated gains: what the change a finding proposes buys, from the what_if metric's replay.

A finding's time at stake is a ceiling (the GPU time its cause covers). Its estimated gain
is what replaying the step graph with the finding's change predicts: the captured window's
gain (`gain_window_ns`) and the median step's (`gain_step_ns`). Which change a rule proposes
is fixed per rule (CHANGE_OF_RULE); a finding about one kernel uses the automatic row for the
kernel with the most kernel time when the finding names that kernel, and a finding about
GEMMs the automatic row for the GEMM category. A rule without a change, or a trace the
replay could not run on, leaves the gain unknown (None): the ceiling alone is shown.

Findings with time at stake are ranked by estimated gain where one exists (by the ceiling
otherwise), so the top findings are the changes that buy the most.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nsys_llm_explainer.model import Finding, MetricResult, Outcome, Severity

CHANGE_OF_RULE = {
    "NLE103": "syncs",  # blocking synchronization
    "NLE208": "copies",  # idle while copying
    "NLE209": "launch",  # launch-bound
    "NLE210": "host",  # host work
    "NLE214": "readbacks",  # scalar read-backs
    "NLE215": "syncs",  # one synchronize per launch
    "NLE304": "copies",  # pageable async copies
    "NLE305": "copies",  # synchronous copies on the launch thread
    "NLE306": "copies",  # tiny transfers
    "NLE311": "copies",  # slow host copies
    "NLE307": "communication",  # exposed communication
    "NLE313": "communication",  # communication on the compute stream
}
TOP_KERNEL_RULES = ("NLE101",)  # about one kernel: the top kernel's automatic row
GEMM_RULES = ("NLE320", "NLE323")  # about GEMMs: the gemm category's row
GEMM_CATEGORY = "gemm"


def _rows(metrics: dict[str, Outcome]) -> list[dict[str, Any]]:
    wi = metrics.get("what_if")
    return list(wi.data.get("rows", [])) if isinstance(wi, MetricResult) else []


def _row_for(f: Finding, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    by_change = {r["change"]: r for r in rows}
    if f.rule_id in CHANGE_OF_RULE:
        return by_change.get(CHANGE_OF_RULE[f.rule_id])
    auto = [r for r in rows if r.get("source") == "automatic"]
    if f.rule_id in GEMM_RULES:
        return next((r for r in auto if r["change"].startswith(f"kernel:{GEMM_CATEGORY}=")), None)
    if f.rule_id in TOP_KERNEL_RULES:
        text = " ".join((f.title, *f.evidence))
        for r in auto:
            selector = r["change"][len("kernel:"):].rsplit("=", 1)[0]
            if selector != GEMM_CATEGORY and selector in text:
                return r
    return None


def attach(findings: list[Finding], metrics: dict[str, Outcome]) -> list[Finding]:
    """The findings with the estimated gain of the change each proposes, where known."""
    rows = _rows(metrics)
    if not rows:
        return findings
    out = []
    for f in findings:
        row = _row_for(f, rows) if f.severity is not Severity.INFO else None
        if row is not None:
            f = dataclasses.replace(f, estimated_gain_ns=max(int(row["gain_window_ns"]), 0),
                                    estimated_gain_step_ns=max(int(row["gain_step_ns"]), 0),
                                    what_if=str(row["change"]))
        out.append(f)
    return out


def rank_key(f: Finding) -> tuple[int, int, str]:
    """Notes last; the others by estimated gain where known, else by time at stake."""
    has_time = f.severity is not Severity.INFO and f.impact_ns is not None
    worth = f.estimated_gain_ns if f.estimated_gain_ns is not None else (f.impact_ns or 0)
    return (0 if has_time else 1, -worth, f.rule_id)
