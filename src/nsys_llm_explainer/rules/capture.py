"""The run and the capture: what the trace holds and how far it can be trusted. No kernels
captured (NLE107), kernels without a launch call (NLE202), clocks out of step (NLE203), GPU idle
at the capture's edges (NLE211), start-up before the steady part (NLE216), CUDA graphs traced
without their kernels (NLE309), a GPU without built-in peak figures (NLE310)."""

from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.capture import (
    KINETO_RECIPE,
    NSYS_RECIPE,
    STARTUP_WORDS,
    calls_text,
    one_shot_recipe,
    one_shot_words,
    startup_parts,
)
from nsys_llm_explainer.diagnosis.capture import where as ending_where
from nsys_llm_explainer.model import Bucket, Cause, Confidence, Finding, Severity, TraceFormat
from nsys_llm_explainer.results.devices import GpuContext
from nsys_llm_explainer.results.launches import CudaGraphs, LaunchOverhead
from nsys_llm_explainer.results.run import Capture, RunFacts
from nsys_llm_explainer.rules.advice import GROUP
from nsys_llm_explainer.rules.base import Rule, RuleInput, dur, ms, pct
from nsys_llm_explainer.rules.impact import (
    MAX_DEVICE_LINES,
    band,
    buckets_by_device,
    per_device,
    startup_capture,
    where,
)
from nsys_llm_explainer.trace.formats import capture_hint

# The command that starts the workload, and what its steady state is, by workload group.
COMMAND = {
    "llm_inference": ("python serve.py ...", "steady-state serving (requests in flight, past warm-up)"),
    "llm_training": ("python train.py ...", "steady-state training steps (past the first iterations)"),
    "pytorch": ("python your_script.py ...", "steady-state iterations (past warm-up and compilation)"),
    "tensorrt": ("trtexec --loadEngine=model.engine ... (or your application)",
                 "steady-state inferences (past engine load and warm-up)"),
    "generic": ("./your_app ...", "the main loop's steady iterations (past initialization)"),
}
COMMAND["llm_prefill"] = COMMAND["llm_inference"]


def recipe(workload: str) -> tuple[str, str]:
    command, steady = COMMAND[GROUP.get(workload, "generic")]
    return (
        "Capture again with CUDA tracing on: nsys profile --trace=cuda,nvtx,osrt --cuda-graph-trace=node "
        f"--sample=none -o trace {command}; then: nsys export --type sqlite --output trace.sqlite trace.nsys-rep",
        f"Make sure the capture window covers {steady} (--delay/--duration, or cudaProfilerStart/Stop with "
        "--capture-range=cudaProfilerApi).",
    )


PROFILER_ADVICE = (
    "Check the Nsight Systems installation: its injection library failed to load into the program (the "
    "quoted line names it). Use an Nsight Systems build that supports this system (its glibc, driver and CUDA "
    "version), or the one installed with the CUDA toolkit, rather than a copy inside a Python environment; "
    "then capture again.",
)
FAILED_ADVICE = (
    "Fix the error the program printed (quoted above), then capture again: the profiler captured what ran, so "
    "its flags are not the problem.",
)
CONFLICT_ADVICE = (
    "Run the program's own profiler or timer outside Nsight Systems, or turn it off while capturing: it found "
    "nothing because Nsight Systems holds CUPTI, and the program failed on that. Fixing the program's error and "
    "capturing again as it is would fail the same way.",
)
INTERRUPTED_ADVICE = (
    "The run was stopped (Ctrl-C, SIGTERM or the profiler's --duration limit) before it launched a kernel: "
    "capture long enough to reach the GPU work (a longer --duration, or --delay past the start-up), and check "
    "why it was still where the quoted traceback ends (a download or a load that hangs is not a GPU problem).",
)
NO_KERNEL_ADVICE = (
    "The program made CUDA calls but launched no kernel and printed no error: check that it reaches its GPU "
    "work (it may have exited early, hung or been killed), and that the capture window covers it "
    "(--delay/--duration, or --capture-range=cudaProfilerApi around the work).",
)


def _evidence(run: RunFacts | None, reason: str) -> list[str]:
    if not run:
        return [reason]
    lines = [reason]
    end = run.ending
    if end and end.conflict:
        lines.append(f"the program's own profiler under Nsight Systems: {end.conflict!r}")
    if end:
        lines.append(f"the program's {end.stream}: {end.line!r}" + (f", then {end.context!r}" if end.context else ""))
    if end and end.where:
        lines.append(f"where it was: {ending_where(end)}")
    if run.cuda_calls:
        lines.append(f"CUDA calls traced: {calls_text(run)}")
    elif run.cuda_trace_requested is False:
        lines.append("the capture settings had CUDA tracing off")
    return lines


def no_kernels(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """No CUDA kernels were captured, so no GPU-side numbers can be computed.

    Fires when the export has no kernel table or the table is empty. What to do depends on why
    (the capture metric's run outcome, diagnosis/capture.py): the profiler failed to attach
    (its injection library did not load: fix the Nsight Systems installation), the program
    failed because its own profiler or timer found nothing while Nsight Systems held CUPTI
    (run that profiler outside Nsight Systems: fixing the program would not help), the program
    failed or was killed before launching a kernel (fix the program's error: the profiler flags
    are fine), the run was interrupted before its GPU work (capture longer; the traceback says
    where it was), CUDA was not traced (capture with `--trace=cuda`), or CUDA calls were traced but
    no kernel ran and no error was printed (the program exited early or hung, or the capture
    window missed the work). The capture command and what to cover depend on the workload
    (rules/advice.py groups): serving for LLM inference, training steps for training, the main
    loop for a plain CUDA code or an unknown one.

    Example:

        NLE107 info: No CUDA kernels were captured
        - the kernel table is empty: no CUDA kernels were captured
        - the program's stderr: "FileNotFoundError: [Errno 2] No such file or directory: 'train.bin'"
    """
    skipped = view.skipped("top_kernels")
    if skipped is None:
        return
    cap = view.result(Capture)
    run = cap.run if cap is not None else None
    outcome = run.outcome if run is not None else None
    advice = {
        "profiler_failed": PROFILER_ADVICE,
        "program_failed": FAILED_ADVICE,
        "killed": FAILED_ADVICE,
        "profiler_conflict": CONFLICT_ADVICE,
        "interrupted": INTERRUPTED_ADVICE,
        "no_kernels": NO_KERNEL_ADVICE + recipe(view.workload)[1:],
    }.get(outcome or "", recipe(view.workload))
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=_evidence(run, skipped.reason),
        recommendation=advice,
    )


NLE107 = Rule(
    id="NLE107",
    name="no-kernels",
    title="No CUDA kernels were captured",
    check=no_kernels,
    metric_ids=("top_kernels",),
)


NO_LAUNCH_MIN_PCT = 5.0


def kernels_without_launch(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Many kernels have no launch call in the trace, so their launch figures are missing.

    A kernel joins its launch call on (pid, correlationId), restricted to launch APIs. Fires
    (low) when at least 5% of kernels find none. Captures cut from a longer run start with
    kernels launched before the window opened; runtime API tracing turned off has the same
    effect. Launch overhead, queue times and boundness then describe only the joined kernels.
    The advice is the trace format's own (trace/formats.py): Nsight Systems capture options,
    or the PyTorch profiler's start and schedule.

    Example:

        NLE202 info: 52.6% of kernels have no launch call in the trace
        - 1,810 of 3,442 kernels; launch and queue figures cover the other 1,632
    """
    d = view.result(LaunchOverhead)
    if d is None or d.kernels_without_launch_pct < NO_LAUNCH_MIN_PCT:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{d.kernels_without_launch:,} of {d.kernels:,} kernels; launch and queue "
            "figures "
            f"cover the other {d.kernels_with_launch:,}"
        ],
        recommendation=[capture_hint(view.schema.format, "launches") or ""],
        title=f"{pct(d.kernels_without_launch_pct)} of kernels have no launch call in the trace",
    )


NLE202 = Rule(
    id="NLE202",
    name="kernels-without-launch",
    title="Kernels without a launch call",
    check=kernels_without_launch,
    metric_ids=("launch_overhead",),
)


def clock_skew(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Some kernels start before the launch call that started them: host and GPU clocks disagree.

    A kernel cannot start before its launch call begins. When the trace says it does, the CPU
    and GPU timestamps are skewed; the launch-to-start latency of those launches is clamped
    to 0 (never reported negative) and they are counted. Fires (low) when any launch is clamped.

    Example:

        NLE203 info: 12 kernels start before their launch call (clock skew)
        - their launch-to-start latency is clamped to 0; host-GPU timings below 1 us are unreliable
    """
    res = view.result(LaunchOverhead)
    if res is None or res.skew_clamped <= 0:
        return
    n = res.skew_clamped
    yield rule.note(
        confidence=Confidence.MEDIUM,
        evidence=[
            f"{n:,} of {res.launch_calls:,} launch calls; their launch-to-start latency is "
            "clamped to 0, and host-GPU timings of about a microsecond are unreliable in this trace"
        ],
        recommendation=[
            "Re-capture with a recent Nsight Systems; keep the clock source the default (no custom "
            "--timestamp settings) so CPU and GPU timestamps share one time base."
        ],
        title=f"{n:,} kernels start before their launch call (clock skew)",
    )


NLE203 = Rule(
    id="NLE203",
    name="clock-skew",
    title="Kernels start before their launch call",
    check=clock_skew,
    metric_ids=("launch_overhead",),
)


EDGE_MIN_PCT = 5.0  # of all device time


def idle_capture_edge(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Much GPU idle time lies where the host is not visible in the capture (a note).

    capture_edge time (idle_causes: outside the first-to-last CUDA call window of the
    processes driving the device, or activity-window time no copy covers) is not at stake:
    the capture cannot say why the GPU idled there. Reported as a note (info) when it is at
    least 5% of all device time, so a reader knows the split leaves it out.

    Example:

        NLE211 info: 12.0% of the GPU time lies where the host is not visible
        - 120.000 ms on 2 GPUs outside the host's captured activity
    """
    per_device = buckets_by_device(view.acct, (Bucket.CAPTURE_EDGE,))
    ns = sum(per_device.values())
    window = view.acct.window()
    if window <= 0 or 100.0 * ns / window < EDGE_MIN_PCT:
        return
    share = 100.0 * ns / window
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{ms(ns)} on {sum(1 for v in per_device.values() if v)} GPU(s) outside the host's captured activity"
        ],
        recommendation=[
            "Start the capture before and end it after the work you study, so the host calls that "
            "feed the GPU are inside the window."
        ],
        title=f"{share:.1f}% of the GPU time lies where the host is not visible",
    )


NLE211 = Rule(
    id="NLE211",
    name="idle-capture-edge",
    title="GPU idle at the capture edges",
    check=idle_capture_edge,
    metric_ids=("idle_causes",),
)


ONE_SHOT_MAX = Severity.MEDIUM  # start-up is part of every run of a one-shot program: a rerun repeats it
STARTUP_COST = (
    "If start-up itself costs you (cold starts, autoscaling): keep compiled kernels between runs "
    "(`TORCHINDUCTOR_CACHE_DIR`, `CUDA_CACHE_PATH` and a large `CUDA_CACHE_MAXSIZE` for PTX JIT), and "
    "warm up with a few requests before taking traffic."
)


def startup(view: RuleInput, rule: Rule) -> Iterator[Finding]:
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
    cap = view.result(Capture)
    assert cap is not None
    by_device = {d.device_id: d.before_steady_ns() for d in view.acct.devices}
    affected, impact = per_device(view.acct, by_device)
    severity = band(impact[1])
    if severity is None:
        return
    program = cap.one_shot_program()
    if program is not None and severity.rank < ONE_SHOT_MAX.rank:
        severity = ONE_SHOT_MAX
    lines = []
    for a in affected[:MAX_DEVICE_LINES]:
        d = view.acct.device(a.device_id) if a.device_id is not None else None
        if d is not None:
            lines.append(f"GPU {a.device_id}: {dur(a.impact_ns)} idle before the steady part begins "
                         f"({a.impact_pct:.1f}% of its {dur(d.window_ns)} window)")
    lines.append(f"during: {startup_parts(cap)}")
    for c in cap.checks:
        if c.found and c.id in STARTUP_WORDS:
            lines.append(f"{STARTUP_WORDS[c.id]}: {c.summary}")
    if cap.steady_start_ns is None:
        lines.append("no steady part follows the start-up events in this capture")
    kineto = view.schema.format is TraceFormat.KINETO
    recipe: tuple[str, ...] = KINETO_RECIPE if kineto else (NSYS_RECIPE[1], NSYS_RECIPE[0])  # the specific change first
    if program is not None:
        lines.insert(0, f"a one-shot run: {one_shot_words(program)} runs its work once, so its start-up is part of "
                        f"every run, and a rerun repeats it (at most {ONE_SHOT_MAX.value})")
        recipe = one_shot_recipe(program)
    yield rule.finding(
        severity=severity,
        confidence=Confidence.HIGH,
        evidence=lines,
        # cold starts and serving warm-up do not apply to a program that runs its work once
        recommendation=recipe if program is not None else (*recipe, STARTUP_COST),
        title=f"Start-up: the GPU sits idle before the steady part begins ({impact[1]:.1f}% of {where(affected)} time)",
        affected=affected,
        impact=impact,
        cause=Cause.STARTUP,
    )


NLE216 = Rule(
    id="NLE216",
    name="startup",
    title="Start-up before the steady part",
    check=startup,
    metric_ids=("capture", "idle_causes"),
)


def graphs_traced_whole(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """CUDA graphs ran but were traced as a whole, so their kernels are missing.

    Fires when the trace has graph launches (cudaGraphLaunch/cuGraphLaunch) and either the
    capture's CUDA-graph trace mode is "graph" or no kernel carries a graph node id. Kernel
    names, per-kernel time, GPU idle and NVTX attribution then miss all graph work. The
    fix is capturing with --cuda-graph-trace=node.

    Example:

        NLE309 info: CUDA graphs were traced as a whole: their kernels are missing
        - 4,096 graph launches, 0 kernels traced as graph nodes (trace mode: graph)
    """
    d = view.result(CudaGraphs)
    if d is None or not d.traced_whole:
        return
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{d.graph_launches:,} graph launches, {d.node_kernels:,} kernels "
            "traced as graph nodes "
            f"(trace mode: {d.trace_mode or 'not recorded'})",
            "kernel names, GPU idle time and NVTX attribution do not include graph work",
        ],
        recommendation=[f"Capture again with nsys profile {d.fix_flag} to see each kernel inside the graphs."],
        title="CUDA graphs were traced as a whole: their kernels are missing",
    )


NLE309 = Rule(
    id="NLE309",
    name="graphs-traced-whole",
    title="CUDA graphs traced without their kernels",
    check=graphs_traced_whole,
    metric_ids=("cuda_graphs",),
)


def unknown_gpu(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """A GPU that ran work is not in the built-in peak table, so no peak context is given.

    The table in compute/peaks.py matches exact CUDA device names only; similar names are never
    guessed. Fires (low) once, listing the unknown active models.

    Example:

        NLE310 info: No peak figures for NVIDIA RTX A2000 12GB
        - devices 0 run work on a model the built-in table does not list
    """
    res = view.result(GpuContext)
    if res is None:
        return
    unknown = [g for g in res.gpus if g.active and not g.known]
    if not unknown:
        return
    names = sorted({g.name or "(no name)" for g in unknown})
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"devices {', '.join(str(g.device_id) for g in unknown)} run work on a "
            "model the built-in "
            "table does not list"
        ],
        recommendation=[
            "Compare against the vendor datasheet of this GPU by hand; peak and ridge "
            "figures are not shown."
        ],
        title=f"No peak figures for {', '.join(names)}",
    )


NLE310 = Rule(
    id="NLE310",
    name="unknown-gpu",
    title="GPU model without built-in peak figures",
    check=unknown_gpu,
    metric_ids=("gpu_context",),
)


RULES = (NLE107, NLE202, NLE203, NLE211, NLE216, NLE309, NLE310)
