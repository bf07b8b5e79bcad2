from __future__ import annotations

from collections.abc import Iterator

from nsys_llm_explainer.model import Confidence, Finding, Severity
from nsys_llm_explainer.rules.base import Rule, RuleInput, ms

MEDIUM_TIME_NS = 1_000_000  # 1 ms of pageable async copies
HIGH_TIME_NS = 10_000_000


def check(view: RuleInput, rule: Rule) -> Iterator[Finding]:
    """Async copies touch pageable host memory, so they run synchronously.

    A cudaMemcpyAsync (or any *Async copy API) from or to pageable (not pinned) host memory
    is staged through a driver buffer and blocks the calling thread. Fires on any such copy
    (joined to its API call on pid and correlation id): low below 1 ms of them, medium from
    1 ms, high from 10 ms.

    Example:

        NLE304 low: 4 async copies use pageable host memory
        - 4 copies, 3.1 KiB, 0.003 ms (memory_transfer_issues.csv, issue pageable_async)
    """
    res = view.metric("memory_transfers")
    if res is None or res.data["pageable_async"]["count"] == 0:
        return
    p = res.data["pageable_async"]
    yield rule.finding(
        Severity.HIGH
        if p["time_ns"] >= HIGH_TIME_NS
        else Severity.MEDIUM
        if p["time_ns"] >= MEDIUM_TIME_NS
        else Severity.LOW,
        Confidence.HIGH,
        [
            f"{p['count']:,} copies, {p['bytes']:,} bytes, {ms(p['time_ns'])} "
            "(memory_transfer_issues.csv, issue pageable_async)"
        ],
        [
            "Allocate host buffers pinned (torch: pin_memory=True, tensor.pin_memory(); "
            "cudaHostAlloc) so async copies stay asynchronous."
        ],
        title=f"{p['count']:,} async copies use pageable host memory",
    )


RULE = Rule(
    "NLE304",
    "pageable-async-copy",
    "Async copies from pageable memory",
    check,
    ("memory_transfers",),
)
