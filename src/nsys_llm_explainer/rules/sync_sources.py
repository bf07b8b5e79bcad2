"""Which specific host-blocking sources have a finding of their own, and the sync_wait time
they explain together, so NLE103 (blocking synchronization) and NLE208 (copies) count only
what the reported findings leave.

The sources (host_patterns): scalar read-backs (NLE214), per-layer sync stalls (NLE217), one
synchronize per launch (NLE215) and synchronous copies (NLE305). A source counts as reported when its rule is selected
(--select/--ignore) and its check yields a finding. Their sync_wait time can overlap, so the
time they explain is the union, read from host_patterns' sync_wait_pieces (each piece of a
device's sync_wait time with the sources that cover it); a hand-built result without pieces
falls back to the sum of the sources' own figures.
"""

from __future__ import annotations

from nsys_llm_explainer.rules.base import RuleInput

SOURCE_RULES = {"scalar_readbacks": "NLE214", "layer_syncs": "NLE217", "sync_per_launch": "NLE215",
                "sync_copies": "NLE305"}


def selected(view: RuleInput, rule_id: str) -> bool:
    """The rule runs under --select/--ignore (the engine's test)."""
    opts = view.options
    if opts.select and not any(rule_id.startswith(s) for s in opts.select):
        return False
    return not any(rule_id.startswith(s) for s in opts.ignore)


def reported(view: RuleInput) -> set[str]:
    """The sources whose rule is selected and yields a finding."""
    from nsys_llm_explainer.rules import RULES

    by_id = {r.id: r for r in RULES}
    out = set()
    for source, rule_id in SOURCE_RULES.items():
        rule = by_id.get(rule_id)
        if rule is not None and selected(view, rule_id) and any(True for _ in rule.check(view, rule)):
            out.add(source)
    return out


def explained(view: RuleInput, sources: set[str]) -> dict[int, int]:
    """Per device: the sync_wait time covered by any of `sources` (their union)."""
    hp = view.metric("host_patterns")
    if hp is None or not sources:
        return {}
    out: dict[int, int] = {}
    pieces = hp.data.get("sync_wait_pieces")
    if pieces is None:  # built by hand: the sources' own figures, summed
        for source in sources:
            src = hp.data.get(source)
            for d in (src or {}).get("devices", []):
                ns = d.get("stall_ns", d.get("idle_ns", 0))
                out[d["device_id"]] = out.get(d["device_id"], 0) + int(ns)
        return out
    for p in pieces:
        if sources & set(p["sources"]):
            out[p["device_id"]] = out.get(p["device_id"], 0) + int(p["idle_ns"])
    return out


def remaining_by_api(view: RuleInput, sources: set[str], devices: set[int]) -> list[tuple[str, int]]:
    """(API, sync_wait ns inside its blocking calls and their refill) that none of `sources`
    covers on `devices`, largest first; [] without pieces."""
    hp = view.metric("host_patterns")
    pieces = hp.data.get("sync_wait_pieces") if hp is not None else None
    out: dict[str, int] = {}
    for p in pieces or []:
        if p["device_id"] in devices and not sources & set(p["sources"]) and p["api"]:
            out[p["api"]] = out.get(p["api"], 0) + int(p["idle_ns"])
    return sorted(((a, ns) for a, ns in out.items() if ns > 0), key=lambda t: (-t[1], t[0]))
