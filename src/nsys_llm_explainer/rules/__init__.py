"""Rule registry. Ids are stable: NLE1xx core, NLE2xx host/launch diagnostics,
NLE3xx GPU work diagnostics, NLE9xx trace quality."""

from __future__ import annotations

import importlib
import pkgutil
import re

from nsys_llm_explainer.rules.base import Rule, RuleInput

# A rule is a module named for its id (nle208_idle_memcpy.py holds NLE208) that defines
# RULE: adding the module registers it. RULES is in id order.
RULE_MODULE = re.compile(r"nle\d{3}_\w+")


def _discover() -> tuple[Rule, ...]:
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if RULE_MODULE.fullmatch(m.name))
    return tuple(importlib.import_module(f"{__name__}.{name}").RULE for name in names)


RULES: tuple[Rule, ...] = _discover()

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
