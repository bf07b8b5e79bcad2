"""Nsight Compute results from exports of several GPU generations: every DRAM counter, the GPU
the export names, tensor-pipe utilisation for GEMMs, DRAM-only intensity of data that stays in
L2, and `TRACE --ncu` attaching a launch only to a kernel of the same name, launch shape and
duration (within 2x), in both trace formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.ncu.results import assess, document, load
from nsys_llm_explainer.options import Options
from tests.conftest import ok
from tests.fixtures import diff_pairs as dp
from tests.fixtures.ncu_export import Launch, details_csv

RTX5090_BW = 1792e9  # peak table: GeForce RTX 5090, 1,792 GB/s
GEMM = "void Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_nn_align8>(Params)"


def one(tmp_path: Path, launch: Launch, metrics: list[str], sections: tuple[str, ...] = ()) -> dict:
    path = tmp_path / f"l{launch.id}_{len(metrics)}_{len(sections)}.csv"
    path.write_text(details_csv([launch], list(sections), metrics))
    return document(assess(load([path])), {})["launches"][0]


def test_consumer_blackwell_dram_op_counters_are_dram_bytes_and_classify_the_gemm(tmp_path: Path) -> None:
    values = {"gpu__time_duration.sum": "111810", "dram__bytes_op_read.sum": "14000000",
              "dram__bytes_op_write.sum": "3500000", "sm__throughput.avg.pct_of_peak_sustained_elapsed": "88.9",
              "device__attribute_display_name": "NVIDIA GeForce RTX 5090"}
    d = one(tmp_path, Launch(0, GEMM, values, cc="12.0"), list(values))
    assert d["device_name"] == "NVIDIA GeForce RTX 5090"  # the GPU name is the export's display name
    assert d["dram_bytes"] == 17_500_000
    assert d["sources"]["dram_bytes"] == "dram__bytes_op_read.sum + dram__bytes_op_write.sum"
    dram_pct = 100 * 17_500_000 / 111_810e-9 / RTX5090_BW
    assert d["dram_pct"] == pytest.approx(dram_pct, abs=0.01) and d["memory_pct"] == d["dram_pct"]
    assert d["class"] == "compute-bound" and d["limiter"] == "SM at 89% of peak"
    assert d["peaks_gpu"] == "NVIDIA GeForce RTX 5090"
    # without the op counters (the export before): no DRAM bytes, not classified
    values.pop("dram__bytes_op_read.sum"), values.pop("dram__bytes_op_write.sum")
    d = one(tmp_path, Launch(1, GEMM, values, cc="12.0"), list(values))
    assert d["dram_bytes"] is None and d["class"] is None


def test_a_gemm_busy_on_the_tensor_pipe_is_compute_bound(tmp_path: Path) -> None:
    sol = {"SpeedOfLight:Compute (SM) Throughput": "45", "SpeedOfLight:Memory Throughput": "30"}
    tensor = {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "78.5"}
    d = one(tmp_path, Launch(0, GEMM, {**sol, **tensor}), list(tensor), ("SpeedOfLight",))
    assert d["tensor_pipe_pct"] == 78.5 and d["class"] == "compute-bound"
    assert d["limiter"] == "tensor pipe at 78% of peak" and d["pct_of_roof"] == 78.5
    d = one(tmp_path, Launch(1, GEMM, sol), [], ("SpeedOfLight",))  # no tensor-pipe counter
    assert d["tensor_pipe_pct"] is None and d["class"] == "latency-bound"


@pytest.mark.parametrize(("l2_bytes", "hit", "flagged"), [
    ("40000000", "12", True),  # L2 traffic 40x the DRAM bytes
    ("2000000", "95", True),  # an L2 hit rate of 95%
    ("2000000", "30", False),
])
def test_dram_only_intensity_of_data_that_stays_in_l2_is_flagged(tmp_path: Path, l2_bytes: str, hit: str,
                                                                  flagged: bool) -> None:
    values = {"gpu__time_duration.sum": "50000", "dram__bytes.sum": "1000000", "lts__t_bytes.sum": l2_bytes,
              "sm__sass_thread_inst_executed_op_ffma_pred_on.sum": "500000000",
              "sm__sass_thread_inst_executed_op_fadd_pred_on.sum": "0",
              "sm__sass_thread_inst_executed_op_fmul_pred_on.sum": "0",
              "MemoryWorkloadAnalysis:L2 Hit Rate": hit,
              "device__attribute_display_name": "NVIDIA H100 80GB HBM3"}
    metrics = [k for k in values if ":" not in k]
    d = one(tmp_path, Launch(0, "void stencil_kernel<float>(float*)", values), metrics, ("MemoryWorkloadAnalysis",))
    p = d["roofline"]
    assert p["flop_per_byte"] == 1000.0 and (d["l2_hit_pct"], d["l2_bytes"]) == (float(hit), float(l2_bytes))
    assert p["dram_only"] is flagged
    assert (p["note"] or "").startswith("DRAM-only arithmetic intensity: its data stays in L2") is flagged


# -- TRACE --ncu: name, grid and block, duration within 2x -----------------------------------------

NORM = dp.NORM
SHAPE = ((4096, 1, 1), (256, 1, 1))


def norm_trace(tmp_path: Path, fmt: str) -> Path:
    """20 calls of the norm at 5 us, grid (4096, 1, 1), block (256, 1, 1)."""
    kernels, calls = [], []
    t = dp.T0
    for i in range(20):
        calls.append(("cudaLaunchKernel", t, t + 1_000, i + 1))
        kernels.append(dp.Kernel(NORM, t + 2_000, t + 2_000 + dp.NORM_NS, i + 1, None, SHAPE[0], SHAPE[1]))
        t += 10_000
    return dp.write(dp.Plan(kernels, calls, [], [], (dp.T0, t)), tmp_path / "trace", fmt)


@pytest.mark.parametrize("fmt", ["nsys", "kineto"])
def test_a_launch_attaches_only_to_a_kernel_of_the_same_shape_and_duration(tmp_path: Path, fmt: str) -> None:
    trace = norm_trace(tmp_path, fmt)
    sol = {"SpeedOfLight:Compute (SM) Throughput": "20", "SpeedOfLight:Memory Throughput": "70"}
    launches = [
        Launch(0, NORM, {**sol, "gpu__time_duration.sum": "6000"}, grid="(4096, 1, 1)", block="(256, 1, 1)"),
        Launch(1, NORM, {**sol, "gpu__time_duration.sum": "5000"}, grid="(64, 1, 1)", block="(256, 1, 1)"),
        Launch(2, NORM, {**sol, "gpu__time_duration.sum": "13000"}, grid="(4096, 1, 1)", block="(256, 1, 1)"),
    ]
    export = tmp_path / "norm.csv"
    export.write_text(details_csv(launches, ["SpeedOfLight"], ["gpu__time_duration.sum"]))
    data = ok(explain(trace, Options(extra={"ncu": (str(export),)})), "ncu")
    assert data["match"]["matched"] == 1 and data["match"]["shapes"] == "compared"
    reasons = {u["index"]: u["reason"] for u in data["match"]["unmatched"]}
    assert reasons[1] == ("the trace ran this kernel with other launch shapes, not grid (64, 1, 1) and block "
                          "(256, 1, 1) (it ran grid (4096, 1, 1) and block (256, 1, 1))")
    assert reasons[2] == ("its duration, 13.0 us, is 2.60x the trace's median call with this grid and block "
                          "(5.0 us): not the same work")
    (row,) = data["kernels"]
    assert row["ncu_launches"] == [0] and row["class"] == "memory-bound" and row["calls"] == 20
    assert data["launches"][0]["match_detail"] == (
        "name, grid and block, duration (1.20x the trace's median call)")
    assert [d["matched_kernel"] for d in data["launches"]] == [NORM, None, None]


def test_an_export_without_launch_shapes_still_needs_the_duration(tmp_path: Path) -> None:
    """An older details layout (no Grid and Block columns), as the BERT export: the name alone
    does not attach a launch whose duration is 2.6x the trace's."""
    trace = norm_trace(tmp_path, "nsys")
    export = tmp_path / "old.csv"
    export.write_text(details_csv([Launch(0, NORM, {"gpu__time_duration.sum": "13000"}, grid="", block="")],
                                  ["SpeedOfLight"], ["gpu__time_duration.sum"]))
    data = ok(explain(trace, Options(extra={"ncu": (str(export),)})), "ncu")
    assert data["match"]["matched"] == 0 and data["kernels"] == []
    assert data["match"]["unmatched"][0]["reason"] == (
        "its duration, 13.0 us, is 2.60x the trace's median call (5.0 us): not the same work")
    export.write_text(details_csv([Launch(0, NORM, {"gpu__time_duration.sum": "5500"}, grid="", block="")],
                                  ["SpeedOfLight"], ["gpu__time_duration.sum"]))
    data = ok(explain(trace, Options(extra={"ncu": (str(export),)})), "ncu")
    assert data["launches"][0]["match_detail"] == (
        "name, not grid and block (the export records neither), duration (1.10x the trace's median call)")
