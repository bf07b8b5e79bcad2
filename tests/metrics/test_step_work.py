"""step_work: the work inside complete steps, checked exactly and against a plain SQL reference."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from benchmarks.synth import SynthConfig, generate
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.options import Options
from tests.fixtures.diff_workloads import ELEMENTWISE_NS, NORM_NS, PERIOD_NS, SYNC_NS, workload


def test_exact_figures_of_nvtx_steps(tmp_path: Path) -> None:
    report = explain(workload(tmp_path / "w.sqlite", steps=4), Options(step_range="step"))
    m = report.document["metrics"]["step_work"]
    assert m["status"] == "ok" and m["steps"] == 4 and m["steps_method"] == "nvtx_step_range"
    kernel = 50_000 + NORM_NS + ELEMENTWISE_NS
    per = m["per_step"]
    assert per["latency_ns"] == [PERIOD_NS] * 4 and per["kernels"] == [3] * 4
    assert per["kernel_ns"] == per["busy_ns"] == [kernel] * 4  # the kernels never overlap
    # host time outside CUDA calls: the window minus the launches [0, 1.5 us] and [1.8, 2 us]
    # and the blocking sync [76 us, 100 us]
    assert per["host_ns"] == [PERIOD_NS - 1_700 - SYNC_NS] * 4
    assert (m["outside_kernels"], m["outside_ns"]) == (0, 0)
    gemm = next(r for r in m["names"] if r["name"].startswith("void gemm_kernel"))
    assert (gemm["calls"], gemm["ns"], gemm["series_ns"], gemm["series_calls"]) == (4, 200_000, [50_000] * 4, 1)
    assert {c["category"]: c["ns"] for c in m["categories"]}["gemm"] == 200_000


def test_repeating_step_ranges_are_complete_steps(tmp_path: Path) -> None:
    report = explain(workload(tmp_path / "w.sqlite", steps=4))
    m = report.document["metrics"]["step_work"]
    # the four `step` ranges tile the launching thread: found as the steps, all complete
    assert m["steps"] == 4 and m["outside_kernels"] == 0
    assert m["kernel_ns"] + m["outside_ns"] == report.document["metrics"]["top_kernels"]["total_kernel_ns"]


def reference(path: Path, steps: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step (pid, start, end): kernels, summed kernel time and the union of their intervals,
    for the kernels whose launch call starts in the step window of their process."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT k.start, k.end, r.start, (k.globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId "
        "AND (r.globalTid >> 24) & 16777215 = (k.globalPid >> 24) & 16777215"
    ).fetchall()
    con.close()
    count, total, union = [], [], []
    for pid, s, e in steps:
        mine = sorted((ks, ke) for ks, ke, rs, p in rows if p == pid and s <= rs < e)
        covered, reach = 0, None
        for ks, ke in mine:
            if reach is None or ks > reach:
                covered += ke - ks
                reach = ke
            elif ke > reach:
                covered += ke - reach
                reach = ke
        count.append(len(mine))
        total.append(sum(ke - ks for ks, ke in mine))
        union.append(covered)
    return np.array(count), np.array(total), np.array(union)


def test_two_process_synthetic_trace_matches_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "tp2.sqlite"
    generate(SynthConfig(kernels=6_000, processes=2, seed=3), path, sidecar=False)
    report = explain(path)
    m = report.document["metrics"]["step_work"]
    steps_table = next(t for t in report.metrics["steps"].tables if t.name == "steps").rows()
    work = next(t for t in report.metrics["step_work"].tables if t.name == "step_work").rows()
    windows = list(zip(work["pid"], work["start_ns"], work["end_ns"], strict=True))
    count, total, union = reference(path, windows)
    assert m["processes"] == 2 and m["steps"] == len(work) == len(steps_table)
    assert (work["kernels"].to_numpy() == count).all()
    assert (work["kernel_ns"].to_numpy() == total).all()
    assert (work["busy_ns"].to_numpy() == union).all()
    # the steps metric counts the same kernels in each step
    merged = work.merge(steps_table, on=["pid", "start_ns"], suffixes=("", "_steps"))
    assert (merged["kernels"] == merged["kernels_steps"]).all()
    # every step is one process's step on its own GPU: its busy time is not shared out over devices
    assert np.median(work["busy_ns"]) == pytest.approx(np.median(union))
