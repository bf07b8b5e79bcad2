"""Run the rules over the metric results: select/ignore, the steady-state cap, the order.

Findings are ordered by the estimated gain of the change they propose where one is known
(rules/impact.py: the step graph replayed with the change), else by GPU time at stake (a
ceiling), largest first, notes last, ties by severity and rule id, so the first finding is the
change that buys the most. When the capture is not steady state (capture
metric), a finding above low keeps a severity above low only if it holds in the steady part
(see rules/impact.py): its cause's share of the steady part (the device window from the
capture's steady start on, at least MIN_STEADY_PCT of the window and MIN_STEADY_NS long, so a
sliver after start-up does not count) reaches a band above low. Such a finding keeps its
advice and says what it holds there; every other finding is capped at low, and one with time
at stake gets advice worded by why the capture cannot be judged: start-up (capture the
steady loop after warm-up), a failed run (fix the failure first: the capture ends in the
program's error; or, when the program's own profiler failed under Nsight Systems, run it
outside) or too little data (capture more). With too little data to judge, every
finding is capped at low.
"""

from __future__ import annotations

import dataclasses

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diagnosis.accounting import CAUSE_BUCKETS, Accounting
from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT
from nsys_llm_explainer.model import (
    GAIN_WHY_PREFIXES,
    Cause,
    Finding,
    Outcome,
    Schema,
    Severity,
    typed_result,
)
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.results.run import Capture
from nsys_llm_explainer.results.serving import Serving
from nsys_llm_explainer.rules import RULES
from nsys_llm_explainer.rules.advice import (
    CONFLICT_ADVICE,
    FAILED_ADVICE,
    TOO_LITTLE_ADVICE,
    UNSTEADY_ADVICE,
    for_amd,
)
from nsys_llm_explainer.rules.base import RuleInput
from nsys_llm_explainer.rules.impact import attach, band
from nsys_llm_explainer.rules.kernels import amd_gpus

MIN_STEADY_PCT = 10.0  # of the device's window
MIN_STEADY_NS = 10_000_000


def _steady(metrics: dict[str, Outcome]) -> bool:
    cap = typed_result(metrics, Capture)
    return cap is None or cap.steady_state


def _too_little(metrics: dict[str, Outcome]) -> bool:
    cap = typed_result(metrics, Capture)
    return cap is not None and cap.too_little()


def _startup(metrics: dict[str, Outcome]) -> bool:
    """Start-up covers enough of the window for the verdict to be not_steady_state."""
    cap = typed_result(metrics, Capture)
    return cap is not None and cap.startup_pct_of_window >= NOT_STEADY_PCT


def steady_share(f: Finding, acct: Accounting) -> tuple[Severity, int, int]:
    """(severity, ns, steady window ns) the finding's cause earns from the steady start on:
    low at most when it cannot be recomputed there or the steady part is too short."""
    if f.cause not in CAUSE_BUCKETS or f.cause == Cause.COMPUTE or not f.affected:
        return Severity.LOW, 0, 0
    ns = window = 0
    for a in f.affected:
        d = acct.device(a.device_id) if a.device_id is not None else None
        if d is None or d.steady is None or not d.steady_window_ns:
            return Severity.LOW, 0, 0
        if d.steady_window_ns < max(MIN_STEADY_NS, MIN_STEADY_PCT / 100.0 * d.window_ns):
            return Severity.LOW, 0, 0
        ns += min(a.impact_ns, d.cause_ns(f.cause, steady=True))
        window += d.steady_window_ns
    found = band(100.0 * ns / window) if window else None
    return (found if found is not None and found.rank < Severity.LOW.rank else Severity.LOW), ns, window


FAILED = {"program_failed": FAILED_ADVICE, "killed": FAILED_ADVICE, "profiler_conflict": CONFLICT_ADVICE}


def _failed(metrics: dict[str, Outcome]) -> tuple[str, ...] | None:
    """The advice for a run whose captured output ends in a failure (capture metric), else None."""
    cap = typed_result(metrics, Capture)
    return FAILED.get(cap.run.outcome) if cap is not None else None


def cap_unsteady(
    findings: list[Finding], acct: Accounting, too_little: bool = False, startup: bool = True,
    failed: tuple[str, ...] | None = None,
) -> list[Finding]:
    """Findings above low keep a severity above low only where the steady part supports it,
    and then keep their advice; with too little data nothing stays above low. The others get
    the advice for why the capture cannot be judged: start-up, or too little data."""
    out = []
    for f in findings:
        if f.cause == Cause.STARTUP:  # start-up's own finding (NLE216): its advice is how to capture steady state
            out.append(f)
            continue
        holds = False
        if f.severity.rank < Severity.LOW.rank:
            steady, ns, window = (Severity.LOW, 0, 0) if too_little else steady_share(f, acct)
            holds = steady.rank < Severity.LOW.rank
            if steady.rank > f.severity.rank:
                f = dataclasses.replace(f, severity=steady)
            if holds:
                f = dataclasses.replace(f, evidence=(
                    *f.evidence, f"it holds in the steady part after start-up: {fmt.dur(ns)} of the "
                    f"{fmt.dur(window)} from the steady start on ({100.0 * ns / window:.1f}%)"))
        if f.impact_ns is not None and f.severity is not Severity.INFO and not holds:
            why = failed if failed else UNSTEADY_ADVICE if startup else TOO_LITTLE_ADVICE
            f = dataclasses.replace(f, recommendation=why)
        out.append(f)
    return out


def advice_workload(metrics: dict[str, Outcome], workload: str) -> str:
    """The workload the rules' advice is chosen by: LLM inference whose serving iterations are
    all prefills is "llm_prefill" (no decode-loop advice for a capture with no decode)."""
    s = typed_result(metrics, Serving)
    if workload == "llm_inference" and s is not None and s.phases and all(p.phase == "prefill" for p in s.phases):
        return "llm_prefill"
    return workload


def apply_rules(
    metrics: dict[str, Outcome], options: Options, schema: Schema, warnings: list[str],
    acct: Accounting | None = None, workload: str = "unknown",
) -> tuple[Finding, ...]:
    view = RuleInput(metrics, options, schema, acct or Accounting(), advice_workload(metrics, workload))
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
        findings = cap_unsteady(findings, view.acct, _too_little(metrics), _startup(metrics), _failed(metrics))
    if amd_gpus(view):
        findings = [dataclasses.replace(f, recommendation=for_amd(tuple(f.recommendation))) for f in findings]
    findings = attach(findings, metrics)
    return tuple(sorted(overlapping(sorted(findings, key=order)), key=order))


# Findings whose time at stake contains others': a serving phase's host time (the GPU idle in
# and between its iterations) is the launch and host-work idle of the idle-cause rules, seen
# per phase. The idle-cause rules split the idle time into disjoint parts among themselves.
COVERS = {"NLE401": ("NLE209", "NLE210"), "NLE402": ("NLE209", "NLE210")}


def overlapping(findings: list[Finding]) -> list[Finding]:
    """Findings in rank order, each whose time at stake is part of one ranked before it on the
    same GPU (COVERS, either way round) saying so: the two figures never add up. Only the first
    keeps HIGH: one high finding per cause (the other drops to MEDIUM)."""
    related = {(a, b) for a, bs in COVERS.items() for b in bs}
    related |= {(b, a) for a, b in related}
    out: list[Finding] = []
    for f in findings:
        devices = {a.device_id for a in f.affected}
        before = next((g for g in out if g.impact_ns and (g.rule_id, f.rule_id) in related
                       and devices & {a.device_id for a in g.affected}), None) if f.impact_ns else None
        if before is not None:
            why = len(f.evidence)
            while why and f.evidence[why - 1].startswith(GAIN_WHY_PREFIXES):
                why -= 1
            line = (f"overlaps {before.rule_id}'s time at stake: the same GPU idle time counted another way, so "
                    "the two figures are parts of one, not additional")
            f = dataclasses.replace(f, evidence=(*f.evidence[:why], line, *f.evidence[why:]),
                                    severity=Severity.MEDIUM if f.severity is Severity.HIGH else f.severity)
        out.append(f)
    return out


def order(f: Finding) -> tuple[bool, int, int, int, str]:
    """Findings by severity, the band of their GPU time at stake (high first); within a band by
    the estimated gain of their change where known, else by the time at stake, largest first;
    notes (no time at stake) after every finding that has some; ties by time at stake, then rule
    id. The band comes first because the gain is an estimate only for the changes the replay
    can model: a cause it cannot model (a wait on other ranks) must not fall below a small one
    it can."""
    worth = f.estimated_gain_ns if f.estimated_gain_ns is not None else (f.impact_ns or 0)
    return (f.impact_ns is None, f.severity.rank, -worth, -(f.impact_ns or 0), f.rule_id)
