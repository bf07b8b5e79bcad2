"""What a finding is worth: its severity from the GPU time at stake, and the estimated gain
of the change it proposes.

Severity: the same bands for every rule, and the shape of the findings that state it: the
affected devices, one evidence line per device, and the cause finding (cause_finding).

A finding's impact is a ceiling: the GPU time its affected devices would get back if its
cause disappeared (idle time it provably causes, or busy time spent on work that need not
run). With several affected devices it is the largest single device's time, never their sum
(the devices run side by side: a sum would exceed the window), and impact_pct is that time as
a share of that device's window (diagnosis/accounting.py: first to last activity per device);
each device's own figures are in `affected` and the evidence. Bands: HIGH_PCT and up is high,
MEDIUM_PCT medium, LOW_PCT low; below LOW_PCT a cause is not reported. Notes about the
capture or the data carry no impact and are INFO.

When the capture is not steady state, a finding keeps a severity above low only if it holds
in the steady part: its idle-time share recomputed from the steady start on (idle_causes'
steady split) still reaches the band, and that part is long enough to judge (rules/engine.py:
MIN_STEADY_PCT of the window and MIN_STEADY_NS). Other findings are capped at low there.

Estimated gains: what the change a finding proposes buys, from the what_if metric's replay.

A finding's time at stake is a ceiling (the GPU time its cause covers). Its estimated gain
is what replaying the step graph with the change that fixes the finding predicts: the
captured window's gain (`gain_window_ns`) and the median step's (`gain_step_ns`), at most the
time at stake (a change can buy more than one cause's idle time, removing host work also
shortens launch-bound waits: the finding claims only its own). Which change fixes a rule's
finding is fixed per rule (CHANGE_OF_RULE: short unfused ops by fusion, a straggling rank by
the slow rank made as fast as the others, ...); a finding about one kernel uses the
automatic row for the kernel with the most kernel time when the finding names that kernel,
and a finding about GEMMs the automatic row for the GEMM category. A rule without a change,
or a trace the replay could not run on, leaves the gain unknown (None): the ceiling alone is
shown. A change that buys nothing gives a gain of 0, and the row's reason is the finding's
last evidence line.

A gain far below its ceiling (under FAR_BELOW of what the change could buy at most: the time
at stake, or for a kernel made K times faster 1 - 1/K of it) says why, from the replayed
critical path (critical_path composition and counts): what the replay keeps as measured
(waits with no recorded dependency, such as the other ranks; work queued before the step;
launch calls held by a full launch queue, which would drain if the device sped up), and how
little of the critical path the change touches. The line is an evidence line starting with one
of GAIN_WHY_PREFIXES (model.py); the report writes it on the time at stake's line.

The rules engine ranks findings with time at stake by severity (the band of their ceiling),
then within a band by estimated gain where one exists (by the ceiling otherwise), so the top
findings of a band are the changes that buy the most (rules/engine.order)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from nsys_llm_explainer import fmt
from nsys_llm_explainer.diagnosis.accounting import Accounting
from nsys_llm_explainer.diagnosis.verdict import graphs_hide_work
from nsys_llm_explainer.graph.path import KIND_TITLES as C_TITLES
from nsys_llm_explainer.metrics.capture import NOT_STEADY_PCT
from nsys_llm_explainer.model import (
    GAIN_FAR_BELOW,
    GAIN_NOT_GIVEN,
    Affected,
    Bucket,
    Cause,
    Confidence,
    Finding,
    Outcome,
    Severity,
    round_pct,
    typed_result,
)
from nsys_llm_explainer.results.run import Capture, CriticalPath, WhatIf, WhatIfRow
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur

HIGH_PCT = 25.0
MEDIUM_PCT = 5.0
LOW_PCT = 1.0


def band(pct: float) -> Severity | None:
    if pct >= HIGH_PCT:
        return Severity.HIGH
    if pct >= MEDIUM_PCT:
        return Severity.MEDIUM
    if pct >= LOW_PCT:
        return Severity.LOW
    return None


def affected_devices(
    acct: Accounting, per_device_ns: dict[int, int], detail: dict[int, str] | None = None
) -> tuple[Affected, ...]:
    """One Affected per device with a non-zero impact, largest first."""
    out = []
    for dev, ns in per_device_ns.items():
        d = acct.device(dev)
        if d is None or ns <= 0:
            continue
        out.append(Affected(dev, d.pids, int(ns), round_pct(d.pct(ns)), (detail or {}).get(dev, "")))
    return tuple(sorted(out, key=lambda a: (-a.impact_ns, a.device_id or 0)))


def total_pct(acct: Accounting, affected: Iterable[Affected]) -> tuple[int, float]:
    """(impact ns, its share of the device's window, unrounded: bands compare it) of a set of
    affected devices: the device with the most time at stake (ties: the larger share), never
    the devices' sum."""
    best: tuple[int, float] = (0, 0.0)
    for a in affected:
        d = acct.device(a.device_id) if a.device_id is not None else None
        share = 100.0 * a.impact_ns / d.window_ns if d is not None and d.window_ns else 0.0
        best = max(best, (int(a.impact_ns), share))
    return best


def buckets_by_device(acct: Accounting, buckets: tuple[Bucket, ...], steady: bool = False) -> dict[int, int]:
    out = {}
    for d in acct.devices:
        source = d.steady if steady and d.steady is not None else d.buckets
        out[d.device_id] = sum(source.get(b, 0) for b in buckets)
    return out


def whole(acct: Accounting, ns: int) -> tuple[tuple[Affected, ...], tuple[int, float]]:
    """For causes measured over the whole trace, not per device: one Affected for all devices,
    the share of all devices' windows."""
    window = acct.window()
    share = 100.0 * ns / window if window else 0.0
    pids = tuple(sorted({p for d in acct.devices for p in d.pids}))
    return (Affected(None, pids, int(ns), round_pct(share)),), (int(ns), share)


def per_device(acct: Accounting, ns_by_device: dict[int, int]) -> tuple[tuple[Affected, ...], tuple[int, float]]:
    affected = affected_devices(acct, ns_by_device)
    return affected, total_pct(acct, affected)


# Shared shape of the cause findings (NLE103, NLE208-NLE210, NLE307): one finding per cause
# over every affected device, its impact the cause's time in diagnosis/accounting.py; on a
# start-up capture, its time in the steady part only (start-up is NLE216's).
#
# When many CUDA graph launches have no execution record (diagnosis/verdict.py
# graphs_hide_work), graph work may fill what looks idle: a cause finding then stays at low
# severity and low confidence and says so.
MAX_DEVICE_LINES = 8


def device_lines(affected: Sequence[Affected], what: str) -> list[str]:
    lines = [
        f"GPU {a.device_id}: {dur(a.impact_ns)} {what} ({a.impact_pct:.1f}% of its window)"
        + (f"; {a.detail}" if a.detail else "")
        for a in affected[:MAX_DEVICE_LINES]
    ]
    if len(affected) > MAX_DEVICE_LINES:
        lines.append(f"... and {len(affected) - MAX_DEVICE_LINES} more devices")
    return lines


def devices_phrase(affected: Sequence[Affected]) -> str:
    """'GPU 3' or '8 GPUs'."""
    devs = sorted(a.device_id for a in affected if a.device_id is not None)
    return f"GPU {devs[0]}" if len(devs) == 1 else f"{len(devs)} GPUs"


def where(affected: Sequence[Affected]) -> str:
    """The possessive of devices_phrase: "GPU 3's", "8 GPUs'"."""
    phrase = devices_phrase(affected)
    return phrase + ("'" if phrase.endswith("s") else "'s")


def startup_capture(view: RuleInput) -> bool:
    """The capture is start-up, not steady state (the verdict not_steady_state): its idle time
    before the steady part begins is NLE216's, one finding for all of start-up."""
    cap = view.result(Capture)
    return cap is not None and cap.startup_pct_of_window >= NOT_STEADY_PCT


def steady_only(view: RuleInput, per_device: dict[int, int], buckets: tuple[Bucket, ...]) -> tuple[dict[int, int], int]:
    """(`per_device` cut to the steady part, the ns cut off): each device keeps at most its
    `buckets` time from the steady start on (none when no steady part follows)."""
    out, cut = {}, 0
    for dev, ns in per_device.items():
        d = view.acct.device(dev)
        steady = sum(d.steady.get(b, 0) for b in buckets) if d is not None and d.steady is not None else 0
        out[dev] = min(ns, steady)
        cut += ns - out[dev]
    return out, cut


def hidden_graphs_cap(
    view: RuleInput, severity: Severity, confidence: Confidence, evidence: list[str]
) -> tuple[Severity, Confidence, list[str]]:
    """Low severity and confidence, and a line saying why, when graph work may fill the idle
    time (see the cause findings above); else unchanged."""
    hidden = graphs_hide_work(view.metrics)
    if hidden is None:
        return severity, confidence, evidence
    capped = Severity.LOW if severity.rank < Severity.LOW.rank else severity
    return capped, Confidence.LOW, [*evidence, f"not reliable: {hidden}"]


def cause_finding(
    view: RuleInput,
    rule: Rule,
    *,
    buckets: tuple[Bucket, ...],
    cause: Cause,
    title: str,
    what: str,
    evidence: Sequence[str],
    recommendations: Sequence[str],
    confidence: Confidence = Confidence.HIGH,
    subtract: dict[int, int] | None = None,
) -> Finding | None:
    """The finding for `buckets`' time on every device, or None below the low band.

    `title` may use {pct} (share of the affected windows) and {where}; `subtract`: per-device
    ns already reported by a more specific finding (not counted twice). On a start-up capture
    (startup_capture) only the steady part counts: the time before it is start-up's finding
    (NLE216), so start-up is not restated as this cause."""
    per_device = buckets_by_device(view.acct, buckets)
    for dev, ns in (subtract or {}).items():
        if dev in per_device:
            per_device[dev] = max(0, per_device[dev] - ns)
    cut = 0
    if startup_capture(view):
        per_device, cut = steady_only(view, per_device, buckets)
    affected = affected_devices(view.acct, per_device)
    ns, pct = total_pct(view.acct, affected)
    severity = band(pct)
    if severity is None:
        return None
    text = title.format(pct=f"{pct:.1f}%", where=where(affected))
    lines = [*device_lines(affected, what), *evidence]
    if cut:
        lines.insert(0, f"the steady part only: {dur(cut)} of this cause before the steady part begins is "
                        "start-up's (NLE216)")
    severity, confidence, lines = hidden_graphs_cap(view, severity, confidence, lines)
    return rule.finding(
        severity=severity,
        confidence=confidence,
        evidence=lines,
        recommendation=recommendations,
        title=text,
        affected=affected,
        impact=(ns, pct),
        cause=cause,
    )


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
    "NLE308": "slow_rank",  # communication time differs across ranks: a straggler
    "NLE302": "fusion",  # short unfused ops
    "NLE312": "fusion",  # a fusion candidate chain
}
TOP_KERNEL_RULES = ("NLE101",)  # about one kernel: the top kernel's automatic row
GEMM_RULES = ("NLE320", "NLE323")  # about GEMMs: the gemm category's row
GEMM_CATEGORY = "gemm"
# From this share of the replayed steps' critical path in waits the replay keeps as measured
# (collectives waiting for another rank, delays with no recorded dependency) on, the replay
# holds most of the step fixed and cannot tell what a change buys: no gain is estimated.
UNEXPLAINED_MAX_PCT = 50.0
FAR_BELOW = 0.5  # a gain under this share of what the change could buy at most says why
HELD_MIN_PCT = 5.0  # a part of the critical path the replay keeps as measured is named from this share
NOT_GIVEN, BELOW = GAIN_NOT_GIVEN, GAIN_FAR_BELOW
# The critical path's kind (graph/path.py) each change acts on, in words.
CHANGE_KIND = {
    "copies": ("copy", "copies make up"), "host": ("host", "host work makes up"),
    "launch": ("launch", "launch overhead makes up"), "readbacks": ("sync", "synchronization makes up"),
    "syncs": ("sync", "synchronization makes up"), "communication": ("communication", "communication makes up"),
}


def _rows(metrics: dict[str, Outcome]) -> tuple[WhatIfRow, ...]:
    wi = typed_result(metrics, WhatIf)
    return wi.rows if wi is not None else ()


def _row_for(f: Finding, rows: tuple[WhatIfRow, ...]) -> WhatIfRow | None:
    by_change = {r.change: r for r in rows}
    if f.rule_id in CHANGE_OF_RULE:
        return by_change.get(CHANGE_OF_RULE[f.rule_id])
    auto = [r for r in rows if r.source == "automatic" and r.change.startswith("kernel:")]
    if f.rule_id in GEMM_RULES:
        return next((r for r in auto if r.change.startswith(f"kernel:{GEMM_CATEGORY}=")), None)
    if f.rule_id in TOP_KERNEL_RULES:
        text = " ".join((f.title, *f.evidence))
        for r in auto:
            selector = r.change[len("kernel:"):].rsplit("=", 1)[0]
            if selector != GEMM_CATEGORY and selector in text:
                return r
    return None


def _kept_pct(cp: CriticalPath | None) -> float:
    """The share of the replayed steps' critical path in waits kept as measured."""
    return 0.0 if cp is None else cp.trust.kept_pct


def _abstain(f: Finding, why: str) -> Finding:
    return dataclasses.replace(f, evidence=(*f.evidence, f"{NOT_GIVEN}{why}"))


def _factor(change: str) -> float:
    """The speed-up of a kernel change (`kernel:gemm=2x`: 2.0), 1.0 for the built-in changes."""
    if not change.startswith("kernel:") or not change.endswith("x"):
        return 1.0
    try:
        return max(1.0, float(change.rsplit("=", 1)[1][:-1]))
    except ValueError:
        return 1.0


def far_below_why(change: str, cp: CriticalPath | None, window_ns: int = 0) -> str:
    """Why a change buys far less than its time at stake, from the replayed critical path (see
    the module docstring); window_ns: the measured window the gain is over."""
    shares = {c.kind: c.pct for c in cp.composition} if cp is not None else {}
    counts = cp.graph.counts if cp is not None else {}
    held = []
    if shares.get("unexplained", 0.0) >= HELD_MIN_PCT:
        held.append(f"waits with no recorded dependency (the other ranks, stream waits without their record: "
                    f"{shares['unexplained']:.0f}% of the critical path)")
    if shares.get("carried", 0.0) >= HELD_MIN_PCT:
        held.append(f"work queued before the step ({shares['carried']:.0f}% of the critical path)")
    slow = int(counts.get("slow_launch_call_ns") or 0)
    if slow and shares.get("launch", 0.0) >= HELD_MIN_PCT and 100.0 * slow >= HELD_MIN_PCT * window_ns:
        held.append(f"launch calls held by a full launch queue ({fmt.dur(slow)} in all), which would drain "
                    "sooner if the device sped up")
    factor = _factor(change)
    kind, words = CHANGE_KIND.get(change, ("kernel", "kernels make up") if change.startswith("kernel:") else ("", ""))
    parts = []
    if factor > 1.0:
        parts.append(f"a {factor:g}x faster kernel saves at most {100.0 * (1 - 1 / factor):.0f}% of its time")
    if held:
        parts.append("the replay keeps as measured " + ", ".join(held))
    if kind:
        own = shares.get(kind, 0.0)
        top = max(((k, v) for k, v in shares.items() if k != kind), key=lambda kv: kv[1], default=None)
        if top is not None and own < top[1]:
            parts.append(f"{words} {own:.0f}% of the replayed critical path, which waits mostly on "
                         f"{C_TITLES.get(top[0], top[0])} ({top[1]:.0f}%)")
    return "; ".join(parts) or "the time at stake mostly overlaps other work the step waits for"


def attach(findings: list[Finding], metrics: dict[str, Outcome]) -> list[Finding]:
    """The findings with the estimated gain of the change each proposes, where known. None
    where the replay cannot tell: its change touches nothing in the graph (the time at stake
    lies in work the change does not model, such as the host in MPI calls), or most of the
    critical path is waits it keeps as measured; the finding's evidence then says why."""
    rows = _rows(metrics)
    if not rows:
        return findings
    cp = typed_result(metrics, CriticalPath)
    unexplained = _kept_pct(cp)
    # without steps the replay's blocks are whole processes: a gain "per step" would say nothing
    per_step = not (cp is not None and cp.step_source == "whole_capture")
    out = []
    for f in findings:
        row = _row_for(f, rows) if f.severity is not Severity.INFO else None
        if row is not None and f.impact_ns and row.changed_nodes == 0:
            f = _abstain(f, f"the replay's `{row.change}` change touches nothing in this capture's "
                            "step graph: the time at stake lies in work it does not model")
        elif row is not None and f.impact_ns and unexplained >= UNEXPLAINED_MAX_PCT:
            f = _abstain(f, f"{unexplained:.0f}% of the replayed steps' critical path is waits the replay keeps "
                            "as measured (on other ranks, or with no recorded dependency such as a stream wait "
                            "without its record): a replay cannot tell what the change buys")
        elif row is not None:
            window, step = max(row.gain_window_ns, 0), max(row.gain_step_ns, 0)
            noted = bool(f.impact_ns and window == 0 and step == 0 and row.note)
            if f.impact_ns is not None and window > f.impact_ns:
                # The change buys more than this cause's idle time (it also shortens other
                # waits): the finding claims at most its ceiling, per step in proportion.
                step = int(step * f.impact_ns / window) if window else 0
                window = f.impact_ns
            if f.impact_ns is not None:
                # A step's gain is part of the capture's: never more than it, nor than the ceiling
                # (a step's own window can replay a little differently from the whole capture's).
                step = min(step, f.impact_ns, window or f.impact_ns)
            f = dataclasses.replace(f, estimated_gain_ns=window, estimated_gain_step_ns=step if per_step else None,
                                    what_if=row.change)
            factor = _factor(row.change)
            ceiling = (f.impact_ns or 0) * ((1 - 1 / factor) if factor > 1.0 else 1.0)
            if ceiling > 0 and window < FAR_BELOW * ceiling:
                why = far_below_why(row.change, cp, row.measured_window_ns)
                f = dataclasses.replace(f, evidence=(*f.evidence, BELOW + why))
            if noted:  # the replay's own words on why the change buys nothing, last
                f = dataclasses.replace(f, evidence=(*f.evidence, f"estimated gain: {row.note}"))
        out.append(f)
    return out
