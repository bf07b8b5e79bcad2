"""What the capture says about itself, planted with known answers: how the run ended, what
the host was doing while the GPU waited, read-backs, steps versus layers, the workload, and
enough data judged by repetition. Each case checks the verdict, the primary bottleneck, the
named source and the advice (tests/fixtures/planted_capture.py, planted_kineto.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.model import Report
from nsys_llm_explainer.rules.advice import FAILED_ADVICE
from tests import reference
from tests.fixtures import planted_capture as pc
from tests.fixtures import planted_kineto as pk
from tests.fixtures.builder import TraceBuilder
from tests.fixtures.kineto.builder import KinetoBuilder

MS, US = pc.MS, pc.US


def nsys(tmp_path: Path, scenario: Callable[[], TraceBuilder]) -> Report:
    return explain(scenario().write(tmp_path / "t.sqlite"))


def kineto(tmp_path: Path, scenario: Callable[[], KinetoBuilder]) -> tuple[Report, list[dict[str, Any]]]:
    b = scenario()
    return explain(b.write(tmp_path / "t.json")), b.events


def written(report: Report, tmp_path: Path) -> str:
    out = report.write(tmp_path / "out", formats="md,json,html,csv")
    return "\n".join(p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file())


def finding(report: Report, rule_id: str):  # type: ignore[no-untyped-def]
    (f,) = [f for f in report.findings if f.rule_id == rule_id]
    return f


def spans(events: list[dict[str, Any]], cat: str, name: str | None = None) -> list[tuple[int, int]]:
    """(start, end) in ns of the events of a category (and name prefix)."""
    out = []
    for e in events:
        if e.get("cat") == cat and (name is None or e["name"].startswith(name)):
            t = int(round(float(str(e["ts"]).replace("\x00num:", "")) * 1000))
            d = int(round(float(str(e["dur"]).replace("\x00num:", "")) * 1000))
            out.append((t, t + d))
    return sorted(out)


def idle_inside(events: list[dict[str, Any]], ranges: list[tuple[int, int]]) -> tuple[int, int]:
    """(GPU idle time inside `ranges`, all GPU idle time), from the first to the last kernel."""
    work = reference.merged(spans(events, "kernel") + spans(events, "gpu_memcpy"))
    w0, w1 = work[0][0], work[-1][1]
    idle = [(a, b) for (_, a), (b, _) in zip(work, work[1:], strict=False) if b > a]
    total = sum(b - a for a, b in idle)
    inside = sum(reference.covered(g, reference.merged([(max(s, w0), min(e, w1)) for s, e in ranges])) for g in idle)
    return inside, total


# -- 1. how the run ended ------------------------------------------------------------------------
def test_a_program_that_fails_after_cuda_init(tmp_path: Path) -> None:
    r = nsys(tmp_path, pc.failed_after_init)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("no_gpu_work", "program_failed")
    quote = "`FileNotFoundError: [Errno 2] No such file or directory: 'train.bin'`"
    assert d.summary == (
        "No GPU work: the program failed before launching a kernel. It made 8 CUDA calls (context creation in "
        "cudaFree (120 ms), 4 stream creations, 2 allocations, 1 device query), then its standard error says "
        f"{quote}. The profiler captured what ran: fix the program's error, then capture again.")
    f = finding(r, "NLE107")
    assert f.recommendation[0].startswith("Fix the error the program printed")
    assert not any("--trace=cuda" in x for x in f.recommendation)
    text = written(r, tmp_path)
    assert "train.bin" in text and "alice-secret" not in text and "/home/" not in text


def test_the_profiler_failing_to_attach(tmp_path: Path) -> None:
    r = nsys(tmp_path, pc.profiler_failed)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("no_gpu_work", "profiler_failed")
    assert ("`python: symbol lookup error: libToolsInjectionProxy64.so: undefined symbol: __libc_dlclose, "
            "version GLIBC_PRIVATE`") in d.summary
    assert finding(r, "NLE107").recommendation[0].startswith("Check the Nsight Systems installation")
    text = written(r, tmp_path)
    assert "alice-secret" not in text and "/opt/nvidia" not in text


def test_cuda_not_traced(tmp_path: Path) -> None:
    r = nsys(tmp_path, pc.cuda_not_traced)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("no_gpu_work", "cuda_not_traced")
    assert d.summary == ("No GPU work: CUDA was not traced (the export has no CUDA API table, and the capture "
                         "settings had CUDA tracing off; it holds 40 NVTX ranges). Capture again with CUDA "
                         "tracing on.")
    assert "--trace=cuda" in finding(r, "NLE107").recommendation[0]


def test_a_run_with_gpu_work_that_ends_in_an_error(tmp_path: Path) -> None:
    r = nsys(tmp_path, pc.failed_with_gpu_work)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("not_steady_state", "program_failed")
    assert d.primary.evidence == ("stderr: RuntimeError: mat1 and mat2 shapes cannot be multiplied "
                                  "(16x512 and 256x1024)",)
    assert d.summary.startswith("Not steady state: the program ended in an error (its standard error says "
                                "`RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x512 and 256x1024)`)")
    assert "Until it failed: GPU-bound" in d.summary and not d.capture.steady_state
    at_stake = [f for f in r.findings if f.impact_ns]
    assert at_stake and all(f.recommendation == FAILED_ADVICE for f in at_stake)


# -- 2. what the host was doing ------------------------------------------------------------------
def test_an_input_pipeline_holding_the_gpu(tmp_path: Path) -> None:
    r, ev = kineto(tmp_path, pk.input_pipeline)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("host_bound", "host")
    inside, idle = idle_inside(ev, spans(ev, "user_annotation", "enumerate(DataLoader)"))
    assert inside >= 0.7 * idle  # the planted share: 7 ms of each ~8.5 ms of idle time
    assert (f"The launching thread was in `enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__` for "
            f"{100 * inside / idle:.1f}% of that time (data loading).") in d.summary
    f = finding(r, "NLE210")
    assert "num_workers" in f.recommendation[0] and "pin_memory=True" in f.recommendation[0]


def test_an_optimizer_step_on_the_host(tmp_path: Path) -> None:
    r, ev = kineto(tmp_path, pk.optimizer_on_host)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.workload.kind) == ("host_bound", "host", "pytorch_training")
    inside, idle = idle_inside(ev, spans(ev, "user_annotation", "Optimizer.step"))
    assert (f"The launching thread was in `Optimizer.step#AdamW.step` for {100 * inside / idle:.1f}% of that "
            "time (the optimizer step).") in d.summary
    for rule in ("NLE210", "NLE209"):
        assert "fused=True" in finding(r, rule).recommendation[0]
    assert "DataLoader" not in " ".join(finding(r, "NLE210").recommendation)


# -- 3. read-backs ---------------------------------------------------------------------------------
def test_a_pageable_read_back_per_step(tmp_path: Path) -> None:
    r, ev = kineto(tmp_path, pk.pageable_readback)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind) == ("host_bound", "host")
    assert ("the host had not queued more work yet: a 4 B device-to-host copy into pageable memory in "
            "`aten::item`, 1 per step.") in d.summary
    f = r.findings[0]
    assert f.rule_id == "NLE214" and f.title.startswith("8 read-backs stall the GPU")
    # Its GPU cost: every gap from a read-back's copy to the next step's first kernel (the
    # last step's read-back is the capture's last work).
    kernels, copies = spans(ev, "kernel"), spans(ev, "gpu_memcpy")
    gaps = [min(s for s, _ in kernels if s >= c1) - c1 for _, c1 in copies[:-1]]
    assert f.impact_ns == sum(gaps)
    assert ".item()" in f.recommendation[0]
    rb = r.ok("host_patterns").data["scalar_readbacks"]
    assert rb["per_step"] == {"steps": 8, "with_readbacks": 8, "median": 1.0, "max": 1}
    (g,) = rb["groups"]
    calls = spans(ev, "cuda_runtime", "cudaMemcpyAsync")
    assert (g["region"], g["op"], g["bytes"], g["count"]) == ("aten::item", "aten::item", 4, 8)
    assert g["host_blocked_ns"] == sum(e - s for s, e in calls)


# -- 4. steps are steps ----------------------------------------------------------------------------
def steps_of(report: Report) -> dict[str, Any]:
    return report.ok("steps").data


def test_layers_nested_in_steps(tmp_path: Path) -> None:
    d = steps_of(nsys(tmp_path, pc.layers_in_steps))
    # 6 steps captured: 5 complete ones between the 6 step starts, each 24 layers of 6 kernels.
    assert (d["method"], d["step_count"], d["layers"]) == ("launch_sequence", 5, {"units": 6, "per_step": 24})
    (p,) = d["phases"]
    assert p["kernels_per_step"] == 1 + 24 * 6 + 2
    assert "the host pauses before each repeat" in d["detail"]


def test_one_step_of_layers_is_one_step(tmp_path: Path) -> None:
    r = nsys(tmp_path, pc.one_step)
    d = steps_of(r)
    assert (d["step_count"], d["layers"]) == (1, {"units": 6, "per_step": 24})
    assert "the layers of one pass, so 1 step" in d["detail"]
    md = (r.write(tmp_path / "out", formats="md") / "report.md").read_text(encoding="utf-8")
    assert "(1 step)" in md


def test_a_step_replayed_as_one_graph(tmp_path: Path) -> None:
    d = steps_of(nsys(tmp_path, pc.graph_decode))
    # 20 replays: 19 complete steps, each one graph replay (96 node kernels) and an argmax.
    assert (d["step_count"], d["layers"]) == (19, None)
    assert d["phases"][0]["kernels_per_step"] == 97
    assert "each repeat is a CUDA graph replay" in d["detail"]


def test_a_step_window_is_its_own_gpu_work(tmp_path: Path) -> None:
    r, ev = kineto(tmp_path, pk.step_starts_with_sync)
    st = r.table("steps")
    hosts = spans(ev, "user_annotation", "ProfilerStep")
    assert list(st["latency_ns"]) == [e - s for s, e in hosts]
    # Each step's own 10 kernels run back to back: 5 ms, whatever its host range began with.
    assert list(st["gpu_latency_ns"]) == [5 * MS] * 6
    assert list(st["kernel_ns"]) == [5 * MS] * 6
    assert steps_of(r)["window"] == "own_kernels"


# -- 5. the workload -------------------------------------------------------------------------------
def test_a_tensorrt_engine(tmp_path: Path) -> None:
    r = nsys(tmp_path, pc.tensorrt_engine)
    d = r.diagnosis
    assert (d.workload.kind, d.verdict, d.primary.kind) == ("tensorrt_inference", "host_bound", "host")
    assert "blocked in `cudaStreamSynchronize`" in d.summary
    assert finding(r, "NLE210").recommendation[0].startswith("Do not synchronize after every inference")


def test_tensor_parallel_inference_with_collectives(tmp_path: Path) -> None:
    r = nsys(tmp_path, pc.tp_inference)
    d = r.diagnosis
    assert (d.workload.kind, d.verdict, d.primary.kind) == ("llm_inference", "communication_bound", "communication")
    assert any("inference with collectives" in e for e in d.workload.evidence)
    f = r.findings[0]
    assert f.rule_id == "NLE307"
    advice = " ".join(f.recommendation)
    assert "custom all-reduce" in advice and "gradient" not in advice


# -- 6. enough data, judged by repetition ------------------------------------------------------------
def test_five_coarse_iterations_are_enough(tmp_path: Path) -> None:
    b = pc.coarse_iterations()
    path = b.write(tmp_path / "t.sqlite")
    r = explain(path)
    d = r.diagnosis
    check = r.ok("capture").data["checks"][0]
    assert (check["found"], check["kernels"], check["steps"]) == (False, 5, 4)
    assert (d.verdict, d.primary.kind) == ("host_bound", "host")
    # The shares beside the verdict, from the rows themselves: MPI ranges and copies in the
    # device's window (first to last copy), outside kernels.
    rows = json.loads(json.dumps(_rows(path)))
    window = (min(s for s, _ in rows["copies"]), max(e for _, e in rows["copies"]))
    busy = reference.merged(rows["kernels"])
    copies = reference.merged(rows["copies"])

    def clip(sp: list[tuple[int, int]]) -> list[tuple[int, int]]:
        return [(max(s, window[0]), min(e, window[1])) for s, e in sp if min(e, window[1]) > max(s, window[0])]

    copy_ns = sum((e - s) - reference.covered((s, e), busy) for s, e in clip(copies))
    mpi_ns = sum((e - s) - reference.covered((s, e), reference.merged(rows["kernels"] + rows["copies"]))
                 for s, e in clip(reference.merged(rows["mpi"])))
    span = window[1] - window[0]
    assert (f"Beside it: communication (collectives, MPI calls) {100 * mpi_ns / span:.1f}%, copies "
            f"{100 * copy_ns / span:.1f}% of the time.") in d.summary
    assert "CPU samples on the launching thread put 100% of it in `main [saxpy]`" in d.summary
    assert "alice-secret" not in written(r, tmp_path)


def _rows(path: Path) -> dict[str, list[tuple[int, int]]]:
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        q = {
            "kernels": 'SELECT "start", "end" FROM CUPTI_ACTIVITY_KIND_KERNEL',
            "copies": 'SELECT "start", "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY',
            "mpi": "SELECT \"start\", \"end\" FROM NVTX_EVENTS WHERE text LIKE 'MPI_%'",
        }
        return {k: [tuple(r) for r in con.execute(sql)] for k, sql in q.items()}
    finally:
        con.close()


@pytest.mark.parametrize("scenario", [pc.layers_in_steps, pc.graph_decode])
def test_planted_steps_are_enough_to_judge(tmp_path: Path, scenario: Callable[[], TraceBuilder]) -> None:
    assert nsys(tmp_path, scenario).diagnosis.verdict != "insufficient_data"
