from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput

CAPTURE_RECIPE = (
    "nsys profile --trace=cuda,nvtx,osrt --cuda-graph-trace=node --sample=none "
    "-o trace python serve.py ...; then: nsys export --type sqlite --output trace.sqlite trace.nsys-rep"
)


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """No CUDA kernels were captured, so no GPU-side numbers can be computed.

    Fires when the export has no kernel table or the table is empty. Usual causes: CUDA
    tracing was off (`--trace` without `cuda`), the capture window missed the GPU work
    (delay/duration, or the workload ran in a child process not followed), or the export was
    made from a report that never reached steady state.

    Example:

        NLE107 info: No CUDA kernels were captured
        - the kernel table is empty: no CUDA kernels were captured
    """
    skipped = view.skipped("top_kernels")
    if skipped is None:
        return
    yield rule.note(
        Confidence.HIGH,
        [skipped.reason],
        [
            f"Capture again with CUDA tracing on: {CAPTURE_RECIPE}",
            "Make sure the capture window covers steady-state inference (--delay/--duration, or "
            "cudaProfilerStart/Stop with --capture-range=cudaProfilerApi).",
        ],
    )


RULE = Rule("NLE107", "no-kernels", "No CUDA kernels were captured", check, ("top_kernels",))
