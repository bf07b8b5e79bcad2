from __future__ import annotations

from collections.abc import Iterator

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


def recipe(workload: str) -> tuple[str, str]:
    command, steady = COMMAND[GROUP.get(workload, "generic")]
    return (
        "Capture again with CUDA tracing on: nsys profile --trace=cuda,nvtx,osrt --cuda-graph-trace=node "
        f"--sample=none -o trace {command}; then: nsys export --type sqlite --output trace.sqlite trace.nsys-rep",
        f"Make sure the capture window covers {steady} (--delay/--duration, or cudaProfilerStart/Stop with "
        "--capture-range=cudaProfilerApi).",
    )


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """No CUDA kernels were captured, so no GPU-side numbers can be computed.

    Fires when the export has no kernel table or the table is empty. Usual causes: CUDA
    tracing was off (`--trace` without `cuda`), the capture window missed the GPU work
    (delay/duration, or the workload ran in a child process not followed), or the export was
    made from a report that never reached steady state. The capture command and what to
    cover depend on the workload (rules/advice.py groups): serving for LLM inference,
    training steps for training, the main loop for a plain CUDA code or an unknown one.

    Example:

        NLE107 info: No CUDA kernels were captured
        - the kernel table is empty: no CUDA kernels were captured
    """
    skipped = view.skipped("top_kernels")
    if skipped is None:
        return
    yield rule.note(Confidence.HIGH, [skipped.reason], recipe(view.workload))


RULE = Rule("NLE107", "no-kernels", "No CUDA kernels were captured", check, ("top_kernels",))
