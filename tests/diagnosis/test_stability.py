"""The verdict rule near its thresholds, on planted captures (tests/fixtures/planted.balance),
and the half-split stability check: the verdicts of the first and the second half of a steady
capture agree with the verdict of the whole (diagnosis/verdict.agree), on planted and on the
shared real captures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.diagnosis import verdict
from nsys_llm_explainer.model import Confidence, Report
from tests.conftest import NSYS_TRACES, SHARED_TRACES
from tests.fixtures import planted
from tests.fixtures.builder import TraceBuilder
from tests.split_capture import kineto_halves, nsys_halves

Build = Callable[[TraceBuilder], Path]


def decision(r: Report) -> verdict.Decision:
    d = r.diagnosis
    assert d is not None
    second = d.second["kind"] if d.second else None
    return verdict.Decision(d.verdict, d.primary.kind if d.primary else None, d.confidence, second=second)


def busy_pct(r: Report) -> float:
    (dev,) = r.diagnosis.devices
    busy = sum(b["ns"] for b in dev["buckets"] if b["bucket"] in ("compute", "exposed_communication"))
    return 100.0 * busy / dev["window_ns"]


# (knobs in us, expected verdict, lead, second). Shares: a step lasts the knobs' sum + ~10 us.
PLANTED = [
    # 85% compute: GPU-bound, the host second.
    ({"compute_us": 850, "host_us": 140}, "gpu_bound", "compute", "host"),
    # 63% compute, 18% exposed all-reduce, 16% host: GPU-bound with communication second, never
    # communication-bound (the 80%-busy capture).
    ({"compute_us": 630, "nccl_us": 180, "host_us": 150}, "gpu_bound", "compute", "communication"),
    # 51% compute, 49% host: busy most of the window but under 2x the host: mixed.
    ({"compute_us": 510, "host_us": 480}, "mixed", "compute", "host"),
    # 49% compute, 51% host: host leads by under 1.25x and the GPU is not underused: mixed.
    ({"compute_us": 490, "host_us": 500}, "mixed", "host", "compute"),
    # 25% compute, 74% host: host-bound.
    ({"compute_us": 250, "host_us": 740}, "host_bound", "host", "compute"),
    # 20% compute, 79% copies: transfer-bound.
    ({"compute_us": 200, "transfer_us": 790}, "transfer_bound", "transfer", "compute"),
]


@pytest.mark.parametrize(("knobs", "want", "lead", "second"), PLANTED)
def test_planted_captures_near_the_thresholds_and_their_halves(
    build: Build, tmp_path: Path, knobs, want, lead, second
) -> None:
    path = build(planted.balance(steps=80, **knobs))  # 240 kernels: each half still has enough to judge
    r = explain(path)
    d = r.diagnosis
    assert (d.verdict, d.primary.kind, d.second["kind"] if d.second else None) == (want, lead, second)
    if want == "gpu_bound":  # the verdict's busy figure is the key numbers' one
        assert f"busy {busy_pct(r):.1f}% of its window" in d.summary
    if want == "mixed":
        assert d.confidence is not Confidence.HIGH
    whole = decision(r)
    for half in nsys_halves(path, tmp_path):
        part = decision(explain(half))
        assert verdict.agree(whole, part), (whole, part)


def test_either_side_of_a_threshold_agrees(build: Build) -> None:
    # Either side of compute = 2 x host (GPU-bound vs mixed): different verdicts, the same lead.
    c = decision(explain(build(planted.balance(compute_us=640, host_us=340))))
    e = decision(explain(build(planted.balance(compute_us=680, host_us=300))))
    assert {c.verdict, e.verdict} == {"mixed", "gpu_bound"} and verdict.agree(c, e)


SHARED_STEADY = [
    NSYS_TRACES / "pipit_cloverleaf.sqlite",
    NSYS_TRACES / "nsysai_h100_2gpu_1s.sqlite",
    SHARED_TRACES / "kineto" / "hf_qwen1.5_0.5b_h100.json.gz",
    SHARED_TRACES / "kineto" / "hta_a100_80gb_rank0.json.gz",
]


@pytest.mark.slow
@pytest.mark.parametrize("trace", SHARED_STEADY, ids=lambda p: p.name.split(".")[0])
def test_halves_of_a_shared_steady_capture_agree_with_the_whole(trace: Path, tmp_path: Path) -> None:
    if not trace.is_file():
        pytest.skip(f"{trace} not found (shared traces sit beside the project, never inside it)")
    whole_report = explain(trace)
    whole = decision(whole_report)
    halves = nsys_halves(trace, tmp_path) if trace.suffix == ".sqlite" else kineto_halves(trace, tmp_path)
    judged = 0
    for half in halves:
        r = explain(half)
        part = decision(r)
        if (part.verdict == "insufficient_data" and verdict.graphs_hide_work(r.metrics)
                and not verdict.graphs_hide_work(whole_report.metrics)):
            # The cut separated CUDA graph launches from their executions (a host that runs far
            # ahead launches them before the middle, the GPU runs them after): that half cannot
            # place their work, which the whole can. Not a different reading of the workload.
            continue
        judged += 1
        if whole.verdict == "insufficient_data":
            assert part.verdict == "insufficient_data"
        else:
            assert verdict.agree(whole, part), (trace.name, whole, part)
    assert judged >= 1
