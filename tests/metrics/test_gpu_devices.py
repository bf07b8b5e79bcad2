"""communication, cuda_graphs and gpu_context with hand-computed answers."""

from __future__ import annotations

import json

import pytest

from nsys_llm_explainer.compute.peaks import BY_NAME, lookup, ridge_points
from nsys_llm_explainer.render.json_writer import render as render_json
from tests import reference
from tests.conftest import analyze, ok
from tests.fixtures.builder import TraceBuilder

NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096UL>)"
GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn"


def comm_trace() -> TraceBuilder:
    b = TraceBuilder("2024.6")
    b.process(100)
    b.process(200)
    b.kernel(1_000, 2_000, device=0, pid=100, name=NCCL)
    b.kernel(1_800, 2_200, device=0, pid=100, stream=9, name=NCCL)
    b.kernel(1_500, 3_000, device=0, pid=100, stream=8, name=GEMM)
    b.kernel(1_000, 3_000, device=1, pid=200, name=NCCL)
    b.kernel(3_000, 3_500, device=1, pid=200, stream=8, name=GEMM)
    return b


def test_communication_overlap_same_device_only(build):
    d = ok(analyze(build(comm_trace())), "communication")
    dev = {x["device_id"]: x for x in d["devices"]}
    comm0, comp0 = [(1_000, 2_000), (1_800, 2_200)], [(1_500, 3_000)]
    union0 = reference.union_length(comm0)
    over0 = sum(reference.covered(iv, comp0) for iv in reference.merged(comm0))
    assert (dev[0]["comm_union_ns"], dev[0]["overlapped_ns"], dev[0]["exposed_ns"]) == (
        union0,
        over0,
        500,
    )
    assert dev[0]["comm_kernel_ns"] == 1_400 and dev[0]["exposed_pct_of_window"] == 25.0
    # Device 0's GEMM runs while device 1 communicates: it must not hide device 1's time.
    assert (dev[1]["comm_union_ns"], dev[1]["overlapped_ns"], dev[1]["exposed_ns"]) == (
        2_000,
        0,
        2_000,
    )
    assert dev[1]["exposed_pct_of_window"] == 80.0
    assert d["comm_kernels"] == 3 and d["comm_kernel_ns"] == 3_400 and d["exposed_ns"] == 2_500
    assert d["device_skew"] == {"max_ns": 2_000, "min_ns": 1_400, "skew_pct": 30.0}
    assert d["process_skew"]["skew_pct"] == 30.0
    assert {(p["pid"], p["device_id"]): p["comm_kernel_ns"] for p in d["processes"]} == {
        (100, 0): 1_400,
        (200, 1): 2_000,
    }
    assert d["top_kernels"][0] == {"name": NCCL, "calls": 3, "total_ns": 3_400}


def test_no_communication_is_measured_zero(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.kernel(0, 100, name=GEMM)
    d = ok(analyze(build(b)), "communication")
    assert (
        d["comm_kernels"] == 0
        and d["device_skew"] is None
        and d["devices"][0]["overlap_pct"] is None
    )


def graph_trace(node: bool, version: str = "2026.2") -> TraceBuilder:
    """2026.2 kernel tables have graphId; older ones only graphNodeId."""
    mode = "Node" if node else "Graph"
    b = TraceBuilder(
        version,
        capture_meta=[
            ("PROCESS_0:CUDA_GRAPH_TRACE_OPTIONS:MODE", mode),
            ("SECRET_ENV_TOKEN", "hunter2-do-not-print"),
        ],
    )
    b.process(100)
    for launch, corr in enumerate((5, 6)):
        t0 = 10_000 * (launch + 1)
        b.runtime(t0, t0 + 100, corr=corr, name="cudaGraphLaunch_v10000")
        if node:
            for j in range(3):
                b.kernel(
                    t0 + 1_000 + 200 * j,
                    t0 + 1_100 + 200 * j,
                    corr=corr,
                    graph_node_id=j + 1,
                    graph_id=7,
                    name=f"node_kernel_{j}",
                )
    b.runtime(50_000, 50_100, corr=9)
    b.kernel(51_000, 52_000, corr=9, name=GEMM)  # an ordinary launch
    return b


def test_node_traced_graphs_attributed_to_launches(build):
    report = analyze(build(graph_trace(node=True)))
    d = ok(report, "cuda_graphs")
    assert (
        d["trace_mode"],
        d["graph_launches"],
        d["node_kernels"],
        d["node_kernels_attributed"],
    ) == ("node", 2, 6, 6)
    assert (
        d["node_kernel_ns"] == 600
        and d["kernels_per_launch_avg"] == 3.0
        and d["kernels_per_launch_max"] == 3
    )
    assert d["traced_whole"] is False and d["fix_flag"] is None
    assert d["graphs"] == [
        {
            "pid": 100,
            "graph_id": 7,
            "launches": 2,
            "node_kernels": 6,
            "kernels_per_launch": 3.0,
            "kernel_ns": 600,
        }
    ]
    assert not [f for f in report.findings if f.rule_id == "NLE309"]


def test_node_kernels_without_graph_id_column(build):
    d = ok(analyze(build(graph_trace(node=True, version="2024.6"))), "cuda_graphs")
    assert (d["node_kernels"], d["node_kernels_attributed"]) == (6, 6)
    assert [(g["graph_id"], g["launches"]) for g in d["graphs"]] == [(-1, 2)]


def test_whole_graph_tracing_warns_with_flag_and_never_leaks_metadata(build):
    report = analyze(build(graph_trace(node=False)))
    d = ok(report, "cuda_graphs")
    assert (d["trace_mode"], d["graph_launches"], d["node_kernels"], d["traced_whole"]) == (
        "graph",
        2,
        0,
        True,
    )
    assert d["fix_flag"] == "--cuda-graph-trace=node"
    found = [f for f in report.findings if f.rule_id == "NLE309"]
    assert found and "--cuda-graph-trace=node" in found[0].recommendation[0]
    assert "hunter2" not in render_json(report)


def test_default_graph_mode_without_graph_launches_is_quiet(build):
    b = TraceBuilder("2024.6", capture_meta=[("CUDA_GRAPH_TRACE_OPTIONS:MODE", "Graph")])
    b.process(100)
    b.runtime(0, 10, corr=1)
    b.kernel(100, 200, corr=1)
    d = ok(analyze(build(b)), "cuda_graphs")
    assert d["trace_mode"] == "graph" and d["graph_launches"] == 0 and d["traced_whole"] is False


def test_gpu_table_names_are_exact_and_ridge_is_peak_over_bandwidth():
    for name in (
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA A100-PCIE-40GB",
        "NVIDIA A100 80GB PCIe",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 PCIe",
        "NVIDIA H100 NVL",
        "NVIDIA H200",
        "NVIDIA L4",
        "NVIDIA L40S",
        "NVIDIA A10",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA B200",
    ):
        spec = lookup(name)
        assert spec is not None and spec.source and spec.bf16_tflops > spec.tf32_tflops
    assert lookup("NVIDIA H100") is None and lookup("NVIDIA A100") is None and lookup(None) is None
    assert lookup("NVIDIA A10X") is None  # similar names are never guessed
    assert all(s.fp8_tflops is None for n, s in BY_NAME.items() if "A100" in n or n == "NVIDIA A10")
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert ridge_points(h100)["bf16"] == pytest.approx(989.5e12 / 3350e9, abs=0.05)


def test_gpu_context_known_unknown_and_copy_bandwidth(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0, name="NVIDIA H100 80GB HBM3", memory_bandwidth=3352320000000)
    b.gpu(1, name="NVIDIA RTX A2000 12GB")
    b.gpu(2, name="NVIDIA A100-SXM4-80GB")  # idle: listed, not active
    b.kernel(0, 1_000, device=0)
    b.kernel(0, 1_000, device=1)
    b.memcpy(10_000, 2_010_000, bytes=64 << 20, copy_kind=1, src_kind=1, dst_kind=2)
    b.memcpy(3_000_000, 3_001_000, bytes=4096, copy_kind=1)  # too small to count
    report = analyze(build(b))
    d = ok(report, "gpu_context")
    g = {x["device_id"]: x for x in d["gpus"]}
    assert (
        g[0]["known"]
        and g[0]["model"] == "H100 SXM5 80GB"
        and g[0]["trace_memory_bandwidth_gbps"] == 3352.3
    )
    assert not g[1]["known"] and g[1]["bf16_tflops"] is None and g[1]["ridge_flop_per_byte"] is None
    assert g[2]["active"] is False
    assert d["unknown_models"] == ["NVIDIA RTX A2000 12GB"]
    (c,) = d["copy_bandwidth"]
    assert (c["device_id"], c["kind"], c["count"]) == (0, "Host-to-Device", 1)
    assert c["achieved_gbps"] == pytest.approx((64 << 20) / 2_000_000, abs=1e-3)
    assert c["pct_of_reference"] == pytest.approx(100 * (64 << 20) / 2_000_000 / 64.0, abs=0.1)
    assert [f.title for f in report.findings if f.rule_id == "NLE310"] == [
        "No peak figures for NVIDIA RTX A2000 12GB"
    ]


def test_gpu_context_skipped_without_target_info(build):
    b = TraceBuilder("2024.6", omit=("TARGET_INFO_GPU",))
    b.process(100)
    b.kernel(0, 10)
    from tests.conftest import skipped

    report = analyze(build(b))
    assert "TARGET_INFO_GPU" in skipped(report, "gpu_context")
    assert json.loads(render_json(report))["metrics"]["gpu_context"]["status"] == "skipped"
