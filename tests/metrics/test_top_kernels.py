"""top_kernels: per (name, device) statistics checked against hand-computed values."""

from __future__ import annotations

import pytest

from tests import reference
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures.builder import TraceBuilder

GEMM = "void gemm_kernel<float, 128>(float const*, float*, int)"
GEMM_MANGLED = "_Z11gemm_kernelIfLi128EEvPKfPfi"
RELU = "void at::native::relu_kernel<4>(float*)"
RELU_MANGLED = "_ZN2at6native11relu_kernelILi4EEEvPf"

# (name, mangled, device, durations); kernels are laid out back to back per device.
KERNELS = (
    (GEMM, GEMM_MANGLED, 0, (100, 200, 300, 400)),
    (GEMM, GEMM_MANGLED, 1, (1000,)),
    (RELU, RELU_MANGLED, 0, (50, 50, 80)),
    ("odd_avg", None, 1, (2, 3)),
)


def two_device_trace(version: str) -> TraceBuilder:
    b = TraceBuilder(version)
    b.process(100)
    clock = {0: 10_000, 1: 10_000}
    for name, mangled, device, durs in KERNELS:
        for d in durs:
            t = clock[device]
            b.kernel(t, t + d, device=device, name=name, mangled=mangled)
            clock[device] = t + d + 1_000
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_stats_per_name_and_device_by_hand(version, build):
    data = ok(analyze(build(two_device_trace(version))), "top_kernels")
    assert data["total_kernel_ns"] == 1000 + 1000 + 180 + 5
    assert data["kernel_count"] == 10
    assert data["distinct_kernels"] == 3
    assert data["devices"] == [0, 1]
    rows = {(r["name"], r["device_id"]): r for r in data["kernels"]}
    assert len(rows) == 4
    g0 = rows[(GEMM, 0)]
    assert (g0["calls"], g0["total_ns"], g0["avg_ns"], g0["min_ns"], g0["max_ns"]) == (
        4, 1000, 250, 100, 400,
    )
    # Nearest rank of 4 sorted values: p50 is the ceil(2)=2nd, p90 the ceil(3.6)=4th.
    assert (g0["p50_ns"], g0["p90_ns"], g0["p99_ns"]) == (200, 400, 400)
    assert g0["pct_of_kernel_time"] == pytest.approx(100 * 1000 / 2185, abs=1e-4)
    g1 = rows[(GEMM, 1)]
    assert (g1["calls"], g1["total_ns"], g1["p50_ns"], g1["p99_ns"]) == (1, 1000, 1000, 1000)
    relu = rows[(RELU, 0)]
    assert (relu["calls"], relu["total_ns"], relu["avg_ns"], relu["min_ns"], relu["max_ns"]) == (
        3, 180, 60, 50, 80,
    )
    # 50, 50, 80: p50 is the ceil(1.5)=2nd value, p90 the ceil(2.7)=3rd.
    assert (relu["p50_ns"], relu["p90_ns"], relu["p99_ns"]) == (50, 80, 80)
    odd = rows[("odd_avg", 1)]
    assert odd["avg_ns"] == 2  # 2.5 rounds half to even
    assert odd["p50_ns"] == 2  # of 2 and 3 the 1st: a duration that occurred, not 2.5
    assert sum(r["pct_of_kernel_time"] for r in data["kernels"]) == pytest.approx(100, abs=1e-3)


@pytest.mark.parametrize("version", GENERATIONS)
def test_sorted_by_total_then_name_then_device(version, build):
    data = ok(analyze(build(two_device_trace(version))), "top_kernels")
    order = [(r["name"], r["device_id"]) for r in data["kernels"]]
    assert order == [(GEMM, 0), (GEMM, 1), (RELU, 0), ("odd_avg", 1)]


def test_percentiles_equal_reference(build):
    durations = [7, 1, 13, 13, 2, 999, 54, 8, 8, 31, 5]
    b = TraceBuilder("2024.6")
    t = 0
    for d in durations:
        b.kernel(t, t + d, name="k")
        t += d + 3
    row = ok(analyze(build(b)), "top_kernels")["kernels"][0]
    for p in (50, 90, 99):
        assert row[f"p{p}_ns"] == reference.percentile(durations, p)
    assert row["avg_ns"] == round(sum(durations) / len(durations))


@pytest.mark.parametrize("version", GENERATIONS)
@pytest.mark.parametrize(
    ("mode", "gemm", "relu"),
    [
        ("demangled", GEMM, RELU),
        ("short", "gemm_kernel", "relu_kernel"),
        ("mangled", GEMM_MANGLED, RELU_MANGLED),
    ],
)
def test_kernel_name_modes(version, mode, gemm, relu, build):
    b = TraceBuilder(version)
    b.kernel(0, 100, name=GEMM, mangled=GEMM_MANGLED)
    b.kernel(200, 250, name=RELU, mangled=RELU_MANGLED)
    report = analyze(build(b), kernel_name=mode)
    data = ok(report, "top_kernels")
    assert data["name_mode"] == mode
    assert [r["name"] for r in data["kernels"]] == [gemm, relu]
    assert list(table(report, "top_kernels", "kernels")["name"]) == [gemm, relu]


def test_same_name_on_two_devices_stays_two_rows_with_exact_totals(build):
    b = TraceBuilder("2024.6")
    for dev in (0, 1, 2):
        for i in range(3):
            b.kernel(i * 1000, i * 1000 + 10 * (dev + 1), device=dev, name="allreduce")
    rows = ok(analyze(build(b)), "top_kernels")["kernels"]
    assert [(r["device_id"], r["calls"], r["total_ns"]) for r in rows] == [
        (2, 3, 90), (1, 3, 60), (0, 3, 30),
    ]


@pytest.mark.parametrize("version", GENERATIONS)
def test_mangled_mode_with_null_mangled_names(version, build):
    # mangledName is nullable: such kernels fall back to their demangled name in every metric.
    b = TraceBuilder(version)
    b.kernel(0, 100, name="plain_c_kernel")
    b.kernel(200, 250, name=GEMM, mangled=GEMM_MANGLED)
    report = analyze(build(b), kernel_name="mangled")
    assert [r["name"] for r in ok(report, "top_kernels")["kernels"]] == [
        "plain_c_kernel", GEMM_MANGLED,
    ]
    tiny = {t["name"] for t in ok(report, "launch_storm")["tiny_kernels"]}
    assert tiny == {"plain_c_kernel", GEMM_MANGLED}
    by_pid = table(report, "per_process", "kernels_by_pid")
    assert set(by_pid["name"]) == {"plain_c_kernel", GEMM_MANGLED}
    assert not any("internal error" in w for w in report.warnings)


def test_kernels_without_any_name_id_are_named_not_crashed(build):
    b = TraceBuilder("2024.6")
    b.kernel(0, 100, name="named")
    b.kernel(200, 300, demangledName="not an id", shortName="nor this", mangled=None)
    report = analyze(build(b))
    names = {r["name"] for r in ok(report, "top_kernels")["kernels"]}
    assert names == {"named", "(unnamed kernel)"}
    assert {t["name"] for t in ok(report, "launch_storm")["tiny_kernels"]} == names
    assert set(table(report, "per_process", "kernels_by_pid")["name"]) == names
