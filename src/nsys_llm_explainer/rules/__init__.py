"""Rule registry. Ids are stable: NLE1xx core, NLE2xx host/launch diagnostics,
NLE3xx GPU work diagnostics, NLE9xx trace quality."""

from __future__ import annotations

from nsys_llm_explainer.rules import (
    capture,
    communication,
    copies,
    efficiency,
    host,
    kernels,
    phases,
    serving,
)
from nsys_llm_explainer.rules.base import Rule, RuleInput

# The rules live in topic modules, each listing its own in RULES; RULES here is all of them
# in id order.
TOPICS = (capture, communication, copies, efficiency, host, kernels, phases, serving)
RULES: tuple[Rule, ...] = tuple(sorted((r for t in TOPICS for r in t.RULES), key=lambda r: r.id))

# Ids no longer used, and where their finding went. An id is never reused.
RETIRED: dict[str, str] = {
    "NLE102": "launch storms are reported by their GPU cost in NLE209 (idle behind kernel launches)",
    "NLE104": "GPU idle time is split by cause in the diagnosis and reported per cause "
    "(NLE103, NLE208-NLE211, NLE307)",
    "NLE201": "launch overhead is reported by its GPU cost in NLE209",
    "NLE204": "host-bound phases are evidence in NLE209 and NLE210, which carry their GPU cost",
    "NLE205": "host-bound time is reported by cause in NLE209 (launch calls) and NLE210 (host work)",
    "NLE206": "a GPU-bound run is the diagnosis verdict gpu_bound",
    "NLE207": "merged into NLE103, which now measures the GPU idle time a blocking sync causes",
}

__all__ = ["RETIRED", "RULES", "Rule", "RuleInput"]
