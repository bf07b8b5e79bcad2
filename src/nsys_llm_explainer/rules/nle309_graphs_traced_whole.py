from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """CUDA graphs ran but were traced as a whole, so their kernels are missing.

    Fires when the trace has graph launches (cudaGraphLaunch/cuGraphLaunch) and either the
    capture's CUDA-graph trace mode is "graph" or no kernel carries a graph node id. Kernel
    names, per-kernel time, GPU idle and NVTX attribution then miss all graph work. The
    fix is capturing with --cuda-graph-trace=node.

    Example:

        NLE309 info: CUDA graphs were traced as a whole: their kernels are missing
        - 4,096 graph launches, 0 kernels traced as graph nodes (trace mode: graph)
    """
    res = view.metric("cuda_graphs")
    if res is None or not res.data["traced_whole"]:
        return
    d = res.data
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=[
            f"{d['graph_launches']:,} graph launches, {d['node_kernels']:,} kernels "
            "traced as graph nodes "
            f"(trace mode: {d['trace_mode'] or 'not recorded'})",
            "kernel names, GPU idle time and NVTX attribution do not include graph work",
        ],
        recommendation=[f"Capture again with nsys profile {d['fix_flag']} to see each kernel inside the graphs."],
        title="CUDA graphs were traced as a whole: their kernels are missing",
    )


RULE = Rule(
    id="NLE309",
    name="graphs-traced-whole",
    title="CUDA graphs traced without their kernels",
    check=check,
    metric_ids=("cuda_graphs",),
)
