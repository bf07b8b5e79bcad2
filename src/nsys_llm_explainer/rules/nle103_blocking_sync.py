from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms, pct

HIGH_PCT = 30.0
MEDIUM_PCT = 10.0
MIN_CALLS = 2  # one sync at the very end of a run is normal


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Host threads spend much of the run blocked in synchronize calls.

    Counts blocking calls only (cudaDeviceSynchronize, cudaStreamSynchronize,
    cudaEventSynchronize, their driver forms, and synchronous cudaMemcpy*), per process,
    as a share of that process's CUDA API window (first to last API call). Fires at >= 10%
    (medium) or >= 30% (high) with at least 2 blocking calls. While a host thread blocks, it
    cannot enqueue the next work, so the GPU drains and then idles.

    Example:

        NLE103 high: Blocking synchronization takes 41.2% of process 4242's CUDA API window
        - 1,312 blocking calls, 301.653 ms in total; largest: cudaDeviceSynchronize (1,312 calls, 301.653 ms)
    """
    res = view.metric("sync")
    if res is None:
        return
    blocking = [c for c in res.data["calls"] if c["blocking"]]
    top = max(blocking, key=lambda c: c["total_ns"], default=None)
    for p in res.data["processes"]:
        share = float(p["blocking_pct_of_window"])
        if share < MEDIUM_PCT or p["blocking_calls"] < MIN_CALLS:
            continue
        evidence = [
            f"process {p['pid']}: {p['blocking_calls']:,} blocking calls, {ms(p['blocking_ns'])} "
            f"of a {ms(p['api_window_ns'])} CUDA API window"
        ]
        if top is not None:
            evidence.append(
                f"largest blocking API overall: {top['api']} ({top['calls']:,} calls, {ms(top['total_ns'])})"
            )
        yield rule.finding(
            Severity.HIGH if share >= HIGH_PCT else Severity.MEDIUM,
            Confidence.HIGH,
            evidence,
            [
                "Remove per-step synchronization: avoid .item(), .cpu(), .tolist() and printing tensors "
                "inside the decode loop; read results back once per step at most.",
                "Use cudaMemcpyAsync with pinned host memory and events instead of synchronous copies.",
                "Overlap the host work of step N+1 with the GPU work of step N (async scheduling).",
            ],
            title=f"Blocking synchronization takes {pct(share)} of process {p['pid']}'s CUDA API window",
        )


RULE = Rule("NLE103", "blocking-sync", "Blocking CPU-GPU synchronization", check, ("sync",))
