"""Rule registry. Ids are stable: NLE1xx core, NLE2xx host/launch diagnostics,
NLE3xx GPU work diagnostics, NLE9xx trace quality."""

from __future__ import annotations

from nsys_llm_explainer.rules import (
    nle101_dominant_kernel,
    nle103_blocking_sync,
    nle105_phase_dominates,
    nle106_low_nvtx_coverage,
    nle107_no_kernels,
    nle108_no_nvtx,
    nle202_kernels_without_launch,
    nle203_clock_skew,
    nle208_idle_memcpy,
    nle209_idle_launch_bound,
    nle210_idle_host_other,
    nle211_idle_capture_edge,
    nle212_slow_steps,
    nle213_steps_not_found,
    nle214_scalar_readbacks,
    nle215_sync_per_launch,
    nle301_uncategorized_kernels,
    nle302_small_op_heavy,
    nle303_sampling_heavy,
    nle304_pageable_async_copy,
    nle305_sync_copy_launch_thread,
    nle306_tiny_transfers,
    nle307_exposed_communication,
    nle308_communication_skew,
    nle309_graphs_traced_whole,
    nle310_unknown_gpu,
    nle311_slow_host_copies,
    nle312_fusion_candidate,
    nle320_gemm_below_roof,
    nle321_low_mfu,
    nle322_low_mbu,
    nle323_fp32_gemm,
)
from nsys_llm_explainer.rules.base import Rule, RuleInput

RULES: tuple[Rule, ...] = (
    nle101_dominant_kernel.RULE,
    nle103_blocking_sync.RULE,
    nle105_phase_dominates.RULE,
    nle106_low_nvtx_coverage.RULE,
    nle107_no_kernels.RULE,
    nle108_no_nvtx.RULE,
    nle202_kernels_without_launch.RULE,
    nle203_clock_skew.RULE,
    nle208_idle_memcpy.RULE,
    nle209_idle_launch_bound.RULE,
    nle210_idle_host_other.RULE,
    nle211_idle_capture_edge.RULE,
    nle212_slow_steps.RULE,
    nle213_steps_not_found.RULE,
    nle214_scalar_readbacks.RULE,
    nle215_sync_per_launch.RULE,
    nle301_uncategorized_kernels.RULE,
    nle302_small_op_heavy.RULE,
    nle303_sampling_heavy.RULE,
    nle304_pageable_async_copy.RULE,
    nle305_sync_copy_launch_thread.RULE,
    nle306_tiny_transfers.RULE,
    nle307_exposed_communication.RULE,
    nle308_communication_skew.RULE,
    nle309_graphs_traced_whole.RULE,
    nle310_unknown_gpu.RULE,
    nle311_slow_host_copies.RULE,
    nle312_fusion_candidate.RULE,
    nle320_gemm_below_roof.RULE,
    nle321_low_mfu.RULE,
    nle322_low_mbu.RULE,
    nle323_fp32_gemm.RULE,
)

# Ids no longer used, and where their finding went. An id is never reused.
RETIRED: dict[str, str] = {
    "NLE102": "launch storms are reported by their GPU cost in NLE209 (idle behind kernel launches)",
    "NLE104": "GPU idle time is split by cause in the diagnosis and reported per cause "
    "(NLE103, NLE208-NLE211, NLE307)",
    "NLE201": "launch overhead is reported by its GPU cost in NLE209",
    "NLE204": "host-bound phases are evidence in NLE209 and NLE210, which carry their GPU cost",
    "NLE205": "host-bound time is reported by cause in NLE209 (launch calls) and NLE210 (host work)",
    "NLE206": "a GPU-bound run is the diagnosis verdict gpu_compute_bound",
    "NLE207": "merged into NLE103, which now measures the GPU idle time a blocking sync causes",
}

__all__ = ["RETIRED", "RULES", "Rule", "RuleInput"]
