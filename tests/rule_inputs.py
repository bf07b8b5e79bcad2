"""Consistent metric results for rule tests: say where each device's time went, get the
gpu_idle / idle_causes / communication data that diagnosis/accounting.py reads back exactly."""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diagnosis import accounting
from nsys_llm_explainer.model import Outcome, Schema, Skipped
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.rules import RULES, RuleInput
from tests.typed_results import result

SCHEMA = Schema(tables={}, kernel_table=None, meta_table=None, nsys_version=None, export_schema_version=None)
IDLE_CAUSES = ("transfer", "communication", "sync_wait", "launch_bound", "capture_edge", "host_other", "device_wait")
WINDOW = 1_000_000


def device_metrics(devices: dict[int, dict[str, int]], window: int = WINDOW, pid: int = 7) -> dict[str, Any]:
    """{device: {cause ns..., "exposed": ns}} -> gpu_idle, idle_causes and communication data.

    The kernel window of every device is [0, window); busy time is what the causes leave."""
    idle_rows, cause_rows, comm_rows = [], [], []
    for dev, ns in devices.items():
        idle = sum(ns.get(c, 0) for c in IDLE_CAUSES)
        busy = window - idle
        idle_rows.append({"device_id": dev, "window_start_ns": 0, "window_end_ns": window,
                          "busy_ns": busy, "idle_ns": idle})
        cause_rows.append({
            "device_id": dev, "owner_pids": [pid], "window_ns": window, "idle_ns": idle, "gap_count": 3,
            "dominant_cause": None,
            "causes": [{"cause": c, "idle_ns": ns.get(c, 0), "pct_of_idle": 0.0, "pct_of_window": 0.0, "gaps": 1}
                       for c in IDLE_CAUSES],
            "queued_gaps": 0, "queued_ns": 0, "copy_ahead_gaps": 0, "copy_ahead_ns": 0, "dependency_ns": 0,
            "refill": {"gaps": 0, "total_ns": 0, "p50_ns": None, "p90_ns": None, "max_ns": 0},
            "activity_start_ns": 0, "activity_end_ns": window, "edge_transfer_ns": 0, "steady": None,
        })
        comm_rows.append({"device_id": dev, "exposed_ns": ns.get("exposed", 0), "comm_union_ns": ns.get("exposed", 0),
                          "overlap_pct": 0.0, "exposed_pct_of_window": 100.0 * ns.get("exposed", 0) / window})
    return {
        "gpu_idle": {"devices": idle_rows},
        "idle_causes": {"causes": list(IDLE_CAUSES), "devices": cause_rows},
        "communication": {"devices": comm_rows, "device_skew": None, "process_skew": None},
    }


def outcomes(data: dict[str, Any], skipped: dict[str, str] | None = None) -> dict[str, Outcome]:
    metrics: dict[str, Outcome] = {m: result(m, d) for m, d in data.items()}
    metrics.update({m: Skipped(m, r) for m, r in (skipped or {}).items()})
    return metrics


def fire(rule_id: str, data: dict[str, Any], workload: str = "unknown",
         skipped: dict[str, str] | None = None) -> list[Any]:
    metrics = outcomes(data, skipped)
    rule = next(r for r in RULES if r.id == rule_id)
    view = RuleInput(metrics, Options(), SCHEMA, accounting.build(metrics), workload)
    return list(rule.check(view, rule))
