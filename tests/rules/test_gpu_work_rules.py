"""NLE301-NLE312: each rule fires on a triggering metric result and stays quiet otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from nsys_llm_explainer.diagnosis import accounting
from nsys_llm_explainer.model import Severity
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.rules import RULES, RuleInput
from tests.compute_rule_data import efficiency, gemm_op, phase, precision, utilization
from tests.rule_inputs import device_metrics, outcomes
from tests.typed_results import result

# NLE33x (Nsight Compute results) have their cases in tests/ncu/test_report.py.
MINE = [r for r in RULES if r.id.startswith("NLE3") and r.id not in ("NLE307", "NLE313", "NLE315")
        and not r.id.startswith("NLE33")]
WINDOW = 100_000_000  # one device, 100 ms; 20 ms of it transfer and 10 ms sync_wait idle


def view(metric_id: str, data: dict[str, Any], workload: str = "llm_inference") -> RuleInput:
    metrics = outcomes(device_metrics({0: {"transfer": 20_000_000, "sync_wait": 10_000_000}}, window=WINDOW))
    metrics[metric_id] = result(metric_id, data)
    return RuleInput(metrics, Options(), None, accounting.build(metrics), workload)  # type: ignore[arg-type]


def rule(rid: str):
    return next(r for r in RULES if r.id == rid)


def sync_copies(count: int, transfer_ns: int, stall_ns: int) -> dict[str, Any]:
    """host_patterns with `count` synchronous copies costing device 0 transfer_ns + stall_ns."""
    return {"sync_copies": {
        "count": count, "bytes": 1 << 20, "copy_ns": transfer_ns, "on_launch_threads": count,
        "apis": [{"api": "cudaMemcpy", "calls": count}], "idle_ns": transfer_ns + stall_ns,
        "devices": [{"device_id": 0, "transfer_ns": transfer_ns, "stall_ns": stall_ns,
                     "idle_ns": transfer_ns + stall_ns}], "pids": [7]}}


def cats(**pcts: float) -> dict[str, Any]:
    """Shares of 50 ms of kernel time on device 0 (half of its 100 ms window)."""
    rows = [
        {
            "category": c,
            "kernel_count": 10,
            "total_ns": int(p * 500_000),
            "pct_of_scope_time": p,
            "distinct_names": 1,
        }
        for c, p in pcts.items()
    ]
    return {
        "categories": rows,
        "by_device": [{"device_id": 0, "total_ns": 50_000_000, "categories": rows}],
        "total_kernel_ns": 50_000_000,
        "other_pct": pcts.get("other", 0.0),
        "table_source": "built-in",
        "top_uncategorized": [{"name": "k", "total_ns": 5, "calls": 1}],
    }


def mem(pageable=(0, 0), sync=(0, 0), tiny=0, total=1000) -> dict[str, Any]:
    return {
        "pageable_async": {"count": pageable[0], "bytes": 10, "time_ns": pageable[1]},
        "sync_on_launch_thread": {
            "count": sync[0],
            "bytes": 10,
            "time_ns": sync[1],
            "scope": "during steps",
        },
        "tiny": {"count": tiny, "time_ns": 3_000_000, "bytes": 5, "per_s": 1.0},
        "transfer_count": total,
        "tiny_bytes": 4096,
    }


def comm(exposed_pct: float, skew: float) -> dict[str, Any]:
    dev = {
        "device_id": 0,
        "exposed_pct_of_window": exposed_pct,
        "exposed_ns": 5,
        "comm_union_ns": 9,
        "overlap_pct": 10.0,
    }
    s = {"max_ns": 5_000_000, "min_ns": 1_000_000, "skew_pct": skew}
    return {"devices": [dev], "device_skew": s, "process_skew": None}


def ctx_gpu(known: bool, pct: float) -> dict[str, Any]:
    return {
        "gpus": [{"device_id": 0, "name": "NVIDIA X", "active": True, "known": known}],
        "copy_bandwidth": [
            {
                "device_id": 0,
                "kind": "Host-to-Device",
                "pct_of_reference": pct,
                "time_ns": 50_000_000,
                "achieved_gbps": 5.0,
                "reference_gbps": 64.0,
            }
        ],
    }


def fusion(occ: int, prox: float) -> dict[str, Any]:
    """2,000 occurrences of 3 kernels: 4,000 launches removed x 1 us = 4 ms (4% of the window)."""
    return {
        "candidates": [
            {
                "occurrences": occ,
                "proximity": prox,
                "kernel_ns": 20_000_000,
                "length": 3,
                "kernels": ["a", "b", "c"],
                "removable_gap_ns": 10,
            }
        ]
    }


ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, char*>(int)"
GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_kernel"


def tops(elementwise_p50: int) -> dict[str, Any]:
    """GPU 0: 30 ms of elementwise kernels (median `elementwise_p50`) and 20 ms of GEMMs."""
    rows = [(ELEMENTWISE, 30_000_000, elementwise_p50), (GEMM, 20_000_000, 500_000)]
    return {"kernels": [{"name": n, "device_id": 0, "calls": 10, "total_ns": t, "p50_ns": p, "max_ns": p}
                        for n, t, p in rows]}


CASES = [
    ("NLE301", "categories", cats(gemm=50, other=50), cats(gemm=90, other=10)),
    ("NLE302", "top_kernels", tops(10_000), tops(17_000_000)),
    ("NLE303", "categories", cats(sampling=12), cats(sampling=3)),
    ("NLE304", "memory_transfers", mem(pageable=(3, 20_000_000)), mem()),
    ("NLE305", "host_patterns", sync_copies(20, 3_000_000, 2_000_000), sync_copies(9, 3_000_000, 2_000_000)),
    ("NLE306", "memory_transfers", mem(tiny=900), mem(tiny=900, total=5000)),
    ("NLE308", "communication", comm(0.0, 80.0), comm(0.0, 10.0)),
    (
        "NLE309",
        "cuda_graphs",
        {
            "traced_whole": True,
            "graph_launches": 4,
            "node_kernels": 0,
            "trace_mode": "graph",
            "fix_flag": "--cuda-graph-trace=node",
        },
        {"traced_whole": False},
    ),
    ("NLE310", "gpu_context", ctx_gpu(False, 90.0), ctx_gpu(True, 90.0)),
    ("NLE311", "gpu_context", ctx_gpu(True, 8.0), ctx_gpu(True, 90.0)),
    ("NLE312", "fusion_candidates", fusion(2_000, 0.9), fusion(2_000, 0.1)),
    ("NLE320", "compute_efficiency", efficiency(gemm_op(20.0, 10_000_000)), efficiency(gemm_op(60.0, 10_000_000))),
    ("NLE321", "model_utilization", utilization(phase("prefill", 50_000_000, mfu=10.0)),
     utilization(phase("prefill", 50_000_000, mfu=45.0))),
    ("NLE322", "model_utilization", utilization(phase("decode", 50_000_000, mbu=20.0)),
     utilization(phase("prefill", 50_000_000, mbu=20.0))),
    ("NLE323", "gemm_precision", precision(20_000_000, 30_000_000), precision(1_000_000, 30_000_000)),
]


def test_every_issue4_rule_has_a_case_and_docs():
    assert sorted(c[0] for c in CASES) == sorted(r.id for r in MINE)
    for r in MINE:
        assert "Example:" in r.doc and r.id in r.doc, r.id


@pytest.mark.parametrize("rid, metric, fires, quiet", CASES)
def test_rule_fires_and_stays_quiet(rid, metric, fires, quiet):
    found = list(rule(rid).check(view(metric, fires), rule(rid)))
    assert found and all(f.rule_id == rid for f in found)
    assert all(f.evidence and f.recommendation for f in found)
    assert list(rule(rid).check(view(metric, quiet), rule(rid))) == []
    assert list(rule(rid).check(RuleInput({}, Options(), None), rule(rid))) == []  # type: ignore[arg-type]


def test_pageable_severity_is_the_impact_band():
    # Pageable copy time over the 100 ms window: 0.5 ms (0.5%) none, 2 ms low, 6 ms medium, 30 ms high.
    r = rule("NLE304")
    found = [list(r.check(view("memory_transfers", mem(pageable=(1, t))), r)) for t in
             (500_000, 2_000_000, 6_000_000, 30_000_000)]
    assert found[0] == []
    assert [f[0].severity for f in found[1:]] == [Severity.LOW, Severity.MEDIUM, Severity.HIGH]
    assert found[2][0].impact_ns == 6_000_000 and found[2][0].impact_pct == 6.0


def test_sync_copy_impact_is_the_copy_idle_plus_the_stall():
    # 20 ms of transfer idle under the copies and 6 ms idle inside the calls: 26% of 100 ms -> high.
    r = rule("NLE305")
    (f,) = r.check(view("host_patterns", sync_copies(20, 20_000_000, 6_000_000)), r)
    assert (f.impact_ns, f.impact_pct, f.severity) == (26_000_000, 26.0, Severity.HIGH)
    assert f.affected[0].detail == "copies 20.0 ms, waiting in the calls 6.00 ms"


def test_sampling_advice_only_for_llm_workloads():
    r = rule("NLE303")
    assert list(r.check(view("categories", cats(sampling=12), workload="generic_cuda"), r)) == []
    (f,) = r.check(view("categories", cats(sampling=12)), r)
    assert f.impact_ns == 6_000_000  # 12% of 50 ms
