from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding
from nsys_llm_explainer.rules.base import Rule, RuleInput

EVIDENCE = 5


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Nsight Compute launches that match no kernel of the trace.

    Reads the ncu metric's match (--ncu): launches whose kernel name matched no trace
    kernel by mangled name, demangled name or (where one side has only that) function name,
    or whose function name several trace kernels share; whose grid and block the trace never
    ran that kernel with; or whose duration is more than 2x off the trace's median call of
    that name and shape (DURATION_FACTOR in metrics/ncu_results.py): results of another
    program or another size of work. Their figures are in ncu.csv but join no trace time and
    give no trace kernel a class. A note (info).

    Example:

        NLE332 info: 2 of 12 Nsight Compute launches match no kernel of the trace
        - Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128…>: no kernel of the trace has this name
        - fmha_fwd_loop_kernel: its duration, 7.8 us, is 2.60x the trace's median call (3.0 us): not the same work
    """
    res = view.metric("ncu")
    if res is None:
        return
    m = res.data["match"]
    if not m["unmatched"]:
        return
    evidence = [f"{view.kernel_label(u['kernel'])}: {u['reason']}" for u in m["unmatched"][:EVIDENCE]]
    if len(m["unmatched"]) > EVIDENCE:
        evidence.append(f"and {len(m['unmatched']) - EVIDENCE} more (tables/ncu_launches.csv)")
    yield rule.note(
        confidence=Confidence.HIGH,
        evidence=evidence,
        recommendation=[
            "Profile the kernels this trace ran (ncu_plan.sh in the report directory names them) with the "
            "same program and build; with several kernels of one function name, export ncu's demangled or "
            "mangled names (`--print-kernel-base demangled`).",
        ],
        title=f"{len(m['unmatched'])} of {m['launches']} Nsight Compute launches match no kernel of the trace",
    )


RULE = Rule(
    id="NLE332",
    name="ncu-unmatched",
    title="Nsight Compute launches without a trace kernel",
    check=check,
    metric_ids=("ncu",),
)
