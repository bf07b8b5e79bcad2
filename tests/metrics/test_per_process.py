"""per_process: kernel time, launch rate, blocking sync and NVTX per decoded pid."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.trace.nsys import export
from tests import reference
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder, gpid, gtid


@pytest.mark.parametrize("version", GENERATIONS)
def test_colliding_correlation_ids_two_processes(version, tmp_path):
    report = analyze(variants.multi_process_colliding_corr(tmp_path / "t.sqlite", version))
    data = ok(report, "per_process")
    rows = [(p["pid"], p["kernel_count"], p["kernel_ns"], p["pct_of_kernel_time"], p["devices"])
            for p in data["processes"]]
    assert rows == [
        (200, 3, 3_500, round(100 * 3_500 / 4_100, 2), [1]),
        (100, 3, 600, round(100 * 600 / 4_100, 2), [0]),
    ]
    procs = {p["pid"]: p for p in data["processes"]}
    # Launch rate over each process's own kernel window: 3 kernels in 3570 ns and 650 ns.
    assert procs[200]["launches_per_s"] == round(3 / 3_570e-9, 1)
    assert procs[100]["launches_per_s"] == round(3 / 650e-9, 1)
    assert procs[100]["blocking_sync_ns"] == 0  # only launches: measured, and zero
    assert procs[100]["nvtx_ranges"] == 0
    assert data["pid_warning"] is None
    assert [p.pid for p in report.trace.processes] == [200, 100]
    by_pid = table(report, "per_process", "kernels_by_pid")
    got = {(int(r.pid), r.name): (int(r.calls), int(r.total_ns)) for r in by_pid.itertuples()}
    assert got == {(100, "k_a"): (1, 100), (100, "k_b"): (1, 200), (100, "k_c"): (1, 300),
                   (200, "k_x"): (1, 500), (200, "k_y"): (1, 1_000), (200, "k_z"): (1, 2_000)}


@pytest.mark.parametrize("version", GENERATIONS)
def test_blocking_sync_and_nvtx_per_process(version, build):
    b = TraceBuilder(version)
    b.kernel(0, 100, pid=100)
    b.kernel(0, 50, pid=200)
    b.runtime(200, 1_200, pid=100, name="cudaDeviceSynchronize_v3020")
    b.runtime(200, 700, pid=200, name="cudaStreamSynchronize_v3020")
    b.runtime(800, 900, pid=200, name="cudaStreamSynchronize_v3020")
    b.nvtx(0, 10, text="a", pid=200)
    b.nvtx(0, 10, text="b", pid=200, tid=201)
    b.nvtx(0, 10, text="c", pid=100)
    procs = {p["pid"]: p for p in ok(analyze(build(b)), "per_process")["processes"]}
    assert (procs[100]["blocking_sync_ns"], procs[200]["blocking_sync_ns"]) == (1_000, 600)
    assert (procs[100]["nvtx_ranges"], procs[200]["nvtx_ranges"]) == (1, 2)


@pytest.mark.parametrize("vm", [0, 1, 7, 0x7FFF])
def test_pid_decoding_ignores_vm_bits(vm, build):
    b = TraceBuilder("2024.6")
    b.kernel(0, 100, globalPid=gpid(4_000_000, vm=vm))
    b.kernel(200, 300, globalPid=gpid(17, vm=vm))
    pids = {p["pid"] for p in ok(analyze(build(b)), "per_process")["processes"]}
    assert pids == {4_000_000, 17}


def test_implausible_pids_warn(build):
    b = TraceBuilder("2024.6")
    b.kernel(0, 100, globalPid=12_345)  # a raw pid, not (pid << 24): decodes to pid 0
    b.kernel(200, 300, pid=100)
    report = analyze(build(b))
    data = ok(report, "per_process")
    assert data["pid_warning"] is not None and data["pid_warning"].startswith("1 kernels")
    assert data["pid_warning"] in report.metrics["per_process"].notes


def test_vectorized_decoding_equals_reference():
    import numpy as np

    values = [0, 1, gpid(1), gtid(100, 101), gtid(0xFFFFFF, 0xFFFFFF, vm=0x7FFF), (1 << 62) + 12345]
    arr = np.array(values, dtype=np.int64)
    assert export.pids(arr).tolist() == [reference.pid_of(v) for v in values]
    assert export.tids(arr).tolist() == [reference.tid_of(v) for v in values]
    assert export.pids(np.array([-1], dtype=np.int64)).tolist() == [-1]
