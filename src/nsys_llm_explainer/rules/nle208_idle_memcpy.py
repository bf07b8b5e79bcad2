from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.diagnosis.evidence import transfer_lines
from nsys_llm_explainer.model import Finding
from nsys_llm_explainer.rules.advice import advice
from nsys_llm_explainer.rules.base import Rule, RuleInput
from nsys_llm_explainer.rules.idle_cause_common import cause_finding


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """The GPU waits on copies: no kernel runs while memcpy/memset activity does.

    Impact: per device, the idle time a copy or memset on that device covers (idle_causes:
    transfer comes first in the precedence), plus copies before the first or after the last
    kernel. Evidence names the copy kinds, their achieved bandwidth, and how many idle gaps
    ended with a kernel that was already queued behind a copy on its own stream (the
    dependency that made the GPU wait). Severity from the impact bands (rules/impact.py).

    Example:

        NLE208 high: GPU waits on copies (97.0% of 2 GPUs' time)
        - GPU 0: 940.505 ms idle while copies ran (97.0% of its window)
        - Host-to-Device: 450 copies, 47.5 GiB in 1.842 s of copy time (27.7 GB/s)
    """
    devices = [d.device_id for d in view.acct.devices]
    f = cause_finding(
        view, rule, ("transfer",), "transfer", "GPU waits on copies ({pct} of {where} time)",
        "idle while copies ran", transfer_lines(view.metrics, view.acct, devices),
        advice("transfer", view.workload),
    )
    if f is not None:
        yield f


RULE = Rule("NLE208", "idle-transfer", "GPU idle while copying", check, ("idle_causes", "memory_transfers"))
