from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.advice import GROUP
from nsys_llm_explainer.rules.base import Rule, RuleInput

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


def _evidence(run: dict[str, Any] | None, reason: str) -> list[str]:
    if not run:
        return [reason]
    from nsys_llm_explainer.diagnosis.outcome import calls_text, where

    lines = [reason]
    end = run.get("ending")
    if end and end.get("conflict"):
        lines.append(f"the program's own profiler under Nsight Systems: {end['conflict']!r}")
    if end:
        lines.append(f"the program's {end['stream']}: {end['line']!r}"
                     + (f", then {end['context']!r}" if end.get("context") else ""))
    if end and end.get("where"):
        lines.append(f"where it was: {where(end)}")
    if run.get("cuda_calls"):
        lines.append(f"CUDA calls traced: {calls_text(run)}")
    elif run.get("cuda_trace_requested") is False:
        lines.append("the capture settings had CUDA tracing off")
    return lines


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """No CUDA kernels were captured, so no GPU-side numbers can be computed.

    Fires when the export has no kernel table or the table is empty. What to do depends on why
    (the capture metric's run outcome, diagnosis/outcome.py): the profiler failed to attach
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
    cap = view.metric("capture")
    run = cap.data.get("run") if cap is not None else None
    outcome = (run or {}).get("outcome")
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


RULE = Rule(
    id="NLE107",
    name="no-kernels",
    title="No CUDA kernels were captured",
    check=check,
    metric_ids=("top_kernels",),
)
