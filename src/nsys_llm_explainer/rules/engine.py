"""Run the rules over the metric results: select/ignore, the steady-state cap, the order.

Findings are ordered by severity, then by GPU time at stake (largest first), then by rule id,
so the first finding is the costliest cause. When the capture is not steady state (capture
metric), a finding above low keeps its severity only if it holds in the steady part (see
rules/impact.py); every other one is capped at low, and a finding with time at stake says to
capture the steady loop before acting on it instead of giving advice for start-up time. With
too little data to judge, every finding is capped at low.
"""

from __future__ import annotations

import dataclasses

from nsys_llm_explainer.diagnosis.accounting import CAUSE_BUCKETS, Accounting
from nsys_llm_explainer.model import Finding, MetricResult, Outcome, Schema, Severity
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.rules import RULES
from nsys_llm_explainer.rules.advice import UNSTEADY_ADVICE
from nsys_llm_explainer.rules.base import RuleInput
from nsys_llm_explainer.rules.impact import band


def _steady(metrics: dict[str, Outcome]) -> bool:
    cap = metrics.get("capture")
    return not isinstance(cap, MetricResult) or bool(cap.data["steady_state"])


def _too_little(metrics: dict[str, Outcome]) -> bool:
    cap = metrics.get("capture")
    return isinstance(cap, MetricResult) and any(
        c["id"] == "too_little_data" and c["found"] for c in cap.data["checks"]
    )


def _steady_severity(f: Finding, acct: Accounting) -> Severity:
    """The severity the finding's cause earns from the steady start on (low at most when it
    cannot be recomputed there)."""
    if f.cause not in CAUSE_BUCKETS or f.cause == "compute" or not f.affected:
        return Severity.LOW
    ns = window = 0
    for a in f.affected:
        d = acct.device(a.device_id) if a.device_id is not None else None
        if d is None or d.steady is None or not d.steady_window_ns:
            return Severity.LOW
        ns += min(a.impact_ns, d.cause_ns(f.cause, steady=True))
        window += d.steady_window_ns
    found = band(100.0 * ns / window) if window else None
    return found if found is not None and found.rank < Severity.LOW.rank else Severity.LOW


def cap_unsteady(findings: list[Finding], acct: Accounting, too_little: bool = False) -> list[Finding]:
    """Findings above low keep their severity only where the steady part supports it; with
    too little data nothing stays above low."""
    out = []
    for f in findings:
        if f.severity.rank < Severity.LOW.rank:
            steady = Severity.LOW if too_little else _steady_severity(f, acct)
            if steady.rank > f.severity.rank:
                f = dataclasses.replace(f, severity=steady)
        if f.impact_ns is not None and f.severity is not Severity.INFO:
            f = dataclasses.replace(f, recommendation=UNSTEADY_ADVICE)
        out.append(f)
    return out


def apply_rules(
    metrics: dict[str, Outcome], options: Options, schema: Schema, warnings: list[str],
    acct: Accounting | None = None, workload: str = "unknown",
) -> tuple[Finding, ...]:
    view = RuleInput(metrics, options, schema, acct or Accounting(), workload)
    findings: list[Finding] = []
    for rule in RULES:
        if options.select and not any(rule.id.startswith(s) for s in options.select):
            continue
        if any(rule.id.startswith(s) for s in options.ignore):
            continue
        try:
            findings.extend(rule.check(view, rule))
        except Exception as exc:  # noqa: BLE001 - one rule's bug must not lose the report
            warnings.append(
                f"rule {rule.id} failed with an internal error ({type(exc).__name__}: {exc})"
            )
    if not _steady(metrics):
        findings = cap_unsteady(findings, view.acct, _too_little(metrics))
    return tuple(sorted(findings, key=lambda f: (f.severity.rank, -(f.impact_ns or 0), f.rule_id)))
