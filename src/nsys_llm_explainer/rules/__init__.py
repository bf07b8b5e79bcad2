"""Rule registry. Ids are stable: NLE1xx core, NLE2xx host/launch diagnostics,
NLE3xx GPU work diagnostics, NLE9xx trace quality."""

from __future__ import annotations

from nsys_llm_explainer.rules import (
    nle101_dominant_kernel,
    nle102_launch_storm,
    nle103_blocking_sync,
    nle104_gpu_idle,
    nle105_phase_dominates,
    nle106_low_nvtx_coverage,
    nle107_no_kernels,
    nle108_no_nvtx,
)
from nsys_llm_explainer.rules.base import Rule, RuleInput

RULES: tuple[Rule, ...] = (
    nle101_dominant_kernel.RULE,
    nle102_launch_storm.RULE,
    nle103_blocking_sync.RULE,
    nle104_gpu_idle.RULE,
    nle105_phase_dominates.RULE,
    nle106_low_nvtx_coverage.RULE,
    nle107_no_kernels.RULE,
    nle108_no_nvtx.RULE,
)

__all__ = ["RULES", "Rule", "RuleInput"]
