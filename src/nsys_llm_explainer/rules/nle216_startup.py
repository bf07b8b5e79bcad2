from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.capture import (
    KINETO_RECIPE,
    NSYS_RECIPE,
    STARTUP_WORDS,
    one_shot_recipe,
    one_shot_words,
    startup_parts,
)
from nsys_llm_explainer.model import Cause, Confidence, Finding, Severity, TraceFormat
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur
from nsys_llm_explainer.rules.idle_cause_common import MAX_DEVICE_LINES, startup_capture, where
from nsys_llm_explainer.rules.impact import band, per_device

ONE_SHOT_MAX = Severity.MEDIUM  # start-up is part of every run of a one-shot program: a rerun repeats it
STARTUP_COST = (
    "If start-up itself costs you (cold starts, autoscaling): keep compiled kernels between runs "
    "(`TORCHINDUCTOR_CACHE_DIR`, `CUDA_CACHE_PATH` and a large `CUDA_CACHE_MAXSIZE` for PTX JIT), and "
    "warm up with a few requests before taking traffic."
)


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Start-up: the GPU sits idle before the steady part of the capture begins.

    One finding for all of start-up, whatever the host did then (JIT compilation and module
    loading, lazy module loading on first launch, context and allocator start-up, autotuning:
    the capture metric's checks). Fires on a start-up capture (the verdict not_steady_state:
    start-up covers at least 25% of the window). Impact: per device, its idle time before the
    steady part begins (all of its idle time when no steady part follows), the same figure as
    the primary bottleneck; the cause findings (NLE103, NLE208-NLE210, NLE307) count only the
    steady part, so no time is reported twice. The main fix is to capture the steady loop.

    A one-shot program (a unit test, a single run: the capture metric's `captured.program`)
    has no steady loop: its start-up is part of every run and a rerun repeats it, so the
    finding is at most medium and its advice is to repeat the work inside one run, or to
    profile the kernel itself. A slice of a longer run has no start-up (the capture metric
    does not count it), so the rule does not fire there.

    Example:

        NLE216 high: Start-up: the GPU sits idle before the steady part begins (99.9% of GPU 0's time)
        - GPU 0: 529 ms idle before the steady part begins (99.9% of its 530 ms window)
        - during: JIT compilation (NVRTC) and module loading (371 ms) and lazy module loading on first launch (59.4 ms)
    """
    if not startup_capture(view):
        return
    cap = view.metric("capture")
    assert cap is not None
    by_device = {d.device_id: d.before_steady_ns() for d in view.acct.devices}
    affected, impact = per_device(view.acct, by_device)
    severity = band(impact[1])
    if severity is None:
        return
    program = (cap.data.get("captured") or {}).get("program") or {}
    one_shot = bool(program.get("one_shot"))
    if one_shot and severity.rank < ONE_SHOT_MAX.rank:
        severity = ONE_SHOT_MAX
    lines = []
    for a in affected[:MAX_DEVICE_LINES]:
        d = view.acct.device(a.device_id) if a.device_id is not None else None
        if d is not None:
            lines.append(f"GPU {a.device_id}: {dur(a.impact_ns)} idle before the steady part begins "
                         f"({a.impact_pct:.1f}% of its {dur(d.window_ns)} window)")
    lines.append(f"during: {startup_parts(cap.data)}")
    for c in cap.data["checks"]:
        if c["found"] and c["id"] in STARTUP_WORDS:
            lines.append(f"{STARTUP_WORDS[c['id']]}: {c['summary']}")
    steady = cap.data.get("steady_start_ns")
    if steady is None:
        lines.append("no steady part follows the start-up events in this capture")
    kineto = view.schema.format is TraceFormat.KINETO
    recipe: tuple[str, ...] = KINETO_RECIPE if kineto else (NSYS_RECIPE[1], NSYS_RECIPE[0])  # the specific change first
    if one_shot:
        lines.insert(0, f"a one-shot run: {one_shot_words(program)} runs its work once, so its start-up is part of "
                        f"every run, and a rerun repeats it (at most {ONE_SHOT_MAX.value})")
        recipe = one_shot_recipe(program)
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=lines,
        # cold starts and serving warm-up do not apply to a program that runs its work once
        recommendation=recipe if one_shot else (*recipe, STARTUP_COST),
        title=f"Start-up: the GPU sits idle before the steady part begins ({impact[1]:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=impact,
        cause=Cause.STARTUP,
    )


RULE = Rule(
    id="NLE216",
    name="startup",
    title="Start-up before the steady part",
    check=check,
    metric_ids=("capture", "idle_causes"),
)
