"""Shared by NLE321 (low MFU) and NLE322 (low MBU): the GPU time a phase would give back at
full utilisation, per device of the phase (a ceiling: no step reaches 100%)."""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.model import Affected
from nsys_llm_explainer.rules.base import RuleInput, ms, pct
from nsys_llm_explainer.rules.impact import per_device


def phase_stake(
    view: RuleInput, phase: dict[str, Any], util_pct: float
) -> tuple[tuple[Affected, ...], tuple[int, float]]:
    """time x (1 - utilisation) on each device of the phase, at most that device's window."""
    stake = int(phase["time_ns"] * max(0.0, 1.0 - util_pct / 100.0))
    per_dev = {}
    for dev in phase.get("device_ids") or []:
        d = view.acct.device(int(dev))
        if d is not None:
            per_dev[int(dev)] = min(stake, d.window_ns)
    return per_device(view.acct, per_dev)


def phase_line(phase: dict[str, Any], what: str, value: float, lo: Any, hi: Any) -> str:
    spread = f" (steps {pct(lo)} to {pct(hi)})" if lo is not None and hi is not None and lo != hi else ""
    return (f"phase {phase['phase']!r} ({phase['kind']}, {phase['steps']:,} steps, {ms(phase['time_ns'])}): "
            f"{what} {pct(value)}{spread}")
