"""NLE201-NLE213: each rule fires on data that should trigger it and stays quiet otherwise."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nsys_llm_explainer.model import MetricResult, Schema, Skipped
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.rules import RULES, RuleInput

SCHEMA = Schema(
    tables={}, kernel_table=None, meta_table=None, nsys_version=None, export_schema_version=None
)
MY_RULES = {r.id: r for r in RULES if r.id.startswith("NLE2")}


def stats(**over: int) -> dict[str, int]:
    base = {
        f"{m}_{s}_ns": 0
        for m in ("api", "queue", "latency")
        for s in ("p50", "p90", "p99", "max", "total")
    }
    return base | over


LAUNCH = {
    "kernels": 1_000,
    "kernels_with_launch": 1_000,
    "kernels_without_launch": 0,
    "kernels_without_launch_pct": 0.0,
    "launch_calls": 1_000,
    "skew_clamped": 0,
    "processes": [
        {
            "pid": 7,
            "launch_calls": 1_000,
            "kernel_ns": 10_000_000,
            **stats(api_p50_ns=4_000, api_total_ns=4_000_000),
        }
    ],
}
ROW = {
    "scope": "process",
    "pid": 7,
    "phase": None,
    "launch_calls": 500,
    "queue_p50_ns": 2_000,
    "queue_p90_ns": 3_000,
    "immediate_start_pct": 95.0,
    "kernel_busy_pct": 80.0,
    "gpu_busy_pct": 80.0,
    "verdict": "mixed",
    "confidence": "medium",
}
BOUND = {"processes": [ROW], "phases": [ROW | {"scope": "phase", "pid": None, "phase": "decode"}]}


def causes(**ns: int) -> dict[str, Any]:
    names = ("sync_wait", "memcpy", "launch_bound", "host_other", "capture_edge")
    idle = sum(ns.values())
    rows = [
        {"cause": c, "gaps": 3, "idle_ns": ns.get(c, 0), "pct_of_idle": 100.0 * ns.get(c, 0) / idle}
        for c in names
    ]
    dominant = max(rows, key=lambda r: r["idle_ns"])["cause"]
    return {
        "devices": [
            {
                "device_id": 0,
                "idle_ns": idle,
                "dominant_cause": dominant,
                "causes": rows,
                "queued_gaps": 0,
                "queued_ns": 0,
                "refill": {"gaps": 3, "total_ns": 30, "p50_ns": 10, "p90_ns": 10, "max_ns": 10},
            }
        ]
    }


GPU_IDLE = {"devices": [{"device_id": 0, "window_start_ns": 0, "window_end_ns": 1_000_000}]}
STEPS = {
    "method": "nvtx_step_range",
    "confidence": "high",
    "detail": "x",
    "phases": [{"phase": "decode", "steps": 20, "outliers": 0, "p50_ns": 1_000, "max_ns": 1_500}],
    "outliers": [],
}
OUTLIER = {
    "step": 3,
    "phase": "decode",
    "latency_ns": 5_000,
    "ratio_to_median": 5.0,
    "gap_ns": 3_000,
    "gap_cause": "host_other",
    "kernel_name": "k",
    "kernel_ns": 100,
    "kernel_median_ns": 90,
    "host_call": None,
    "host_call_ns": 0,
    "reason": "idle_gap",
}


def quiet_inputs() -> dict[str, Any]:
    return {
        "launch_overhead": LAUNCH,
        "boundness": BOUND,
        "gpu_idle": GPU_IDLE,
        "idle_causes": causes(
            sync_wait=10, memcpy=10, launch_bound=10, host_other=10, capture_edge=10
        ),
        "steps": STEPS,
    }


def fire(rule_id: str, data: dict[str, Any], skipped: dict[str, str] | None = None) -> list[Any]:
    metrics: dict[str, Any] = {m: MetricResult(m, d) for m, d in data.items()}
    metrics.update({m: Skipped(m, r) for m, r in (skipped or {}).items()})
    rule = MY_RULES[rule_id]
    return list(rule.check(RuleInput(metrics, Options(), SCHEMA), rule))


def with_changes(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(quiet_inputs())
    keys = path.split(".")
    node: Any = data
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    node[keys[-1]] = value
    return data


TRIGGERS = {
    "NLE201": with_changes("launch_overhead.processes.0.api_p50_ns", 12_000),
    "NLE202": with_changes("launch_overhead.kernels_without_launch_pct", 12.0),
    "NLE203": with_changes("launch_overhead.skew_clamped", 3),
    "NLE204": with_changes("boundness.phases.0.verdict", "host_bound"),
    "NLE205": with_changes("boundness.processes.0.verdict", "host_bound"),
    "NLE206": with_changes("boundness.processes.0.verdict", "gpu_bound"),
    "NLE207": with_changes("idle_causes", causes(sync_wait=300_000, host_other=1_000)),
    "NLE208": with_changes("idle_causes", causes(memcpy=300_000, host_other=1_000)),
    "NLE209": with_changes("idle_causes", causes(launch_bound=300_000, host_other=1_000)),
    "NLE210": with_changes("idle_causes", causes(host_other=300_000, memcpy=1_000)),
    "NLE211": with_changes("idle_causes", causes(capture_edge=300_000, memcpy=1_000)),
    "NLE212": with_changes("steps.phases.0.outliers", 2)
    | {"steps": STEPS | {"phases": [STEPS["phases"][0] | {"outliers": 2}], "outliers": [OUTLIER]}},
    "NLE213": with_changes("steps.confidence", "low"),
}


def test_every_issue3_rule_has_a_trigger_case():
    assert set(MY_RULES) == set(TRIGGERS)


@pytest.mark.parametrize("rule_id", sorted(TRIGGERS))
def test_rule_fires_and_stays_quiet(rule_id):
    assert fire(rule_id, quiet_inputs()) == []
    found = fire(rule_id, TRIGGERS[rule_id])
    assert len(found) == 1
    f = found[0]
    assert f.rule_id == rule_id and f.evidence and f.recommendation
    assert not any("`" in e for e in f.evidence)
    assert "Example:" in MY_RULES[rule_id].doc


def test_rules_quiet_when_metrics_are_skipped():
    skipped = {m: "not measured" for m in quiet_inputs()}
    for rule_id in MY_RULES:
        assert fire(rule_id, {}, skipped) == []


def test_steps_not_found_fires_on_the_skip_reason():
    found = fire("NLE213", {}, {"steps": "no steps found: nothing repeats"})
    assert len(found) == 1 and found[0].title == "Steps were not identified"


def test_capture_edge_is_always_low():
    (f,) = fire("NLE211", TRIGGERS["NLE211"])
    assert f.severity.value == "low"
    # Severity bands follow NLE104: 30% of the 1 ms window is medium, 45% high, 10% low.
    (g,) = fire("NLE210", TRIGGERS["NLE210"])
    assert g.severity.value == "medium"
    (h,) = fire("NLE210", with_changes("idle_causes", causes(host_other=450_000, memcpy=1_000)))
    assert h.severity.value == "high"
    (i,) = fire("NLE210", with_changes("idle_causes", causes(host_other=100_000, memcpy=1_000)))
    assert i.severity.value == "low"
