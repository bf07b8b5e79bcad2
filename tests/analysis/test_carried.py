"""Work queued before the capture (analysis/carried.py): which kernels are carried, and that no
step counts them. Expected values are worked out by hand from the planted trace."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsys_llm_explainer.analysis.carried import carried
from nsys_llm_explainer.api import explain
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.trace.formats import open_trace
from tests.conftest import SHARED_TRACES
from tests.fixtures.builder import TraceBuilder

STEP = 100_000
STEPS = 4


def plant(path: Path, *, unlaunched_late: bool = False) -> Path:
    """Three kernels run at the start with no launch call in the capture (queued before it,
    drained by the first step's leading synchronize): 5, 7 and 9 µs on stream 7, then one of
    4 µs on stream 9. Then STEPS NVTX `step` ranges, each with a launch and its 20 µs kernel.
    `unlaunched_late`: one more kernel without a launch call runs in the middle of step 2,
    after launched kernels on its stream: a missing launch record, not carried."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0)
    t = 0
    for dur in (5_000, 7_000, 9_000):
        b.kernel(t, t + dur, stream=7, corr=900_000 + t, name="void prev_step_kernel<float>(float*)")
        t += dur
    b.kernel(t, t + 4_000, stream=9, corr=950_000, name="void prev_step_other(float*)")
    b.runtime(0, 26_000, name="cudaDeviceSynchronize_v3020", corr=1)
    for i in range(STEPS):
        s = 30_000 + i * STEP
        b.nvtx(s, s + STEP, text="step")
        b.runtime(s + 1_000, s + 3_000, corr=10 + i)
        b.kernel(s + 5_000, s + 25_000, stream=7, corr=10 + i, name="void gemm_kernel<float>(float*)")
    if unlaunched_late:
        s = 30_000 + 2 * STEP
        b.kernel(s + 40_000, s + 41_000, stream=7, corr=990_000, name="void lost_record(float*)")
    out = path / "carried.sqlite"
    b.write(out)
    return out


def test_kernels_run_before_the_first_recorded_launch_of_their_stream_are_carried(tmp_path: Path) -> None:
    data = open_trace(plant(tmp_path, unlaunched_late=True))
    try:
        c = carried(data)
        names = data.kernel_names(data.kernels().name_id)
        carried_names = sorted(names[int(i)] for i in data.kernels().name_id[c.mask])
    finally:
        data.close()
    # stream 9 has no recorded launch: the process's first launched kernel on device 0 bounds it
    assert c.kernels == 4 and c.kernel_ns == 5_000 + 7_000 + 9_000 + 4_000
    assert c.busy_ns == 25_000 and c.end_ns == 25_000 and c.devices == (0,)
    assert "void lost_record(float*)" not in carried_names


def test_no_step_counts_carried_work(tmp_path: Path) -> None:
    doc = explain(plant(tmp_path), Options(step_range="step")).document
    steps, work = doc["metrics"]["steps"], doc["metrics"]["step_work"]
    assert steps["carried"] == {"kernels": 4, "kernel_ns": 25_000, "busy_ns": 25_000, "end_ns": 25_000,
                                "devices": [0]}
    row = steps["phases"][0]
    assert row["steps"] == STEPS and row["kernels_per_step"] == 1 and row["kernel_ns_per_step"] == 20_000
    assert row["gpu_busy_ns"] == STEPS * 20_000  # the carried kernels run before the first step
    assert work["per_step"]["kernels"] == [1] * STEPS and work["per_step"]["kernel_ns"] == [20_000] * STEPS
    assert (work["outside_kernels"], work["outside_ns"]) == (4, 25_000)


def test_a_capture_without_launch_records_carries_nothing(tmp_path: Path) -> None:
    b = TraceBuilder("2024.6")
    b.process(100)
    b.gpu(0)
    b.kernel(0, 1_000, corr=5)
    b.kernel(2_000, 3_000, corr=6)
    b.runtime(0, 10, name="cudaStreamSynchronize_v3020", corr=99)  # API tracing on, no launch recorded
    path = tmp_path / "t.sqlite"
    b.write(path)
    data = open_trace(path)
    try:
        assert carried(data).kernels == 0  # nothing tells what came before the capture
    finally:
        data.close()


HF_QWEN = SHARED_TRACES / "kineto" / "hf_qwen1.5_0.5b_h100.json.gz"


@pytest.mark.skipif(not HF_QWEN.exists(), reason=f"shared trace {HF_QWEN} is absent")
def test_hf_qwen_previous_step_is_carried() -> None:
    """436 kernels (13.7 ms) of the previous step run during the step's leading
    cudaDeviceSynchronize; steps and step_work agree on the step's own 1,029."""
    doc = explain(HF_QWEN).document
    steps, work = doc["metrics"]["steps"], doc["metrics"]["step_work"]
    assert steps["carried"]["kernels"] == 436 and round(steps["carried"]["kernel_ns"] / 1e6, 1) == 13.7
    assert steps["phases"][0]["kernels_per_step"] == 1029 == work["per_step"]["kernels"][0]
