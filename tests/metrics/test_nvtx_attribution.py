"""nvtx_attribution: (pid, corr) join, innermost range, inclusive time, coverage."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.options import PhaseMap
from tests import reference
from tests.conftest import GENERATIONS, analyze, ok
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder


def by_name(data: dict) -> dict[str, tuple[int, int, int]]:
    return {r["name"]: (r["kernel_count"], r["kernel_ns"], r["inclusive_kernel_ns"])
            for r in data["ranges"]}


def colliding(version: str) -> TraceBuilder:
    """The multi-process variant's rows plus NVTX ranges on each launching thread."""
    b = TraceBuilder(version)
    for pid in (100, 200):
        b.process(pid)
    for pid, corr, s, e in ((100, 1, 1000, 1010), (100, 2, 1100, 1110), (100, 3, 1200, 1210),
                            (200, 1, 1000, 1020), (200, 2, 1100, 1120), (200, 3, 1200, 1220)):
        b.runtime(s, e, pid=pid, corr=corr)
    for pid, dev, corr, s, e in ((100, 0, 1, 1050, 1150), (100, 0, 2, 1160, 1360),
                                 (100, 0, 3, 1400, 1700), (200, 1, 1, 1030, 1530),
                                 (200, 1, 2, 1540, 2540), (200, 1, 3, 2600, 4600)):
        b.kernel(s, e, pid=pid, device=dev, corr=corr, name=f"k{pid}_{corr}")
    b.nvtx(900, 1150, text="p100", pid=100)  # pid 100's launches 1 and 2, not 3
    b.nvtx(900, 1050, text="p200_a", pid=200)  # pid 200's launch 1
    b.nvtx(1090, 1300, text="p200_b", pid=200)  # pid 200's launches 2 and 3
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_join_uses_process_and_correlation_id(version, build):
    data = ok(analyze(build(colliding(version))), "nvtx_attribution")
    assert data["total_kernel_ns"] == 4_100
    assert data["attributed_ns"] == 100 + 200 + 500 + 1_000 + 2_000
    assert data["coverage"] == round(3_800 / 4_100, 4)
    assert data["kernels_without_launch"] == 0
    assert data["kernels_outside_ranges"] == 1
    assert by_name(data) == {
        "p100": (2, 300, 300),
        "p200_a": (1, 500, 500),
        "p200_b": (2, 3_000, 3_000),
    }


# Ranges on pid 100 / tid 100: (name, start, end, eventType).
RANGES = (
    ("step", 0, 10_000, 59),
    ("forward", 1_000, 5_000, 59),
    ("layer", 1_500, 2_500, 59),
    ("layer", 1_600, 2_400, 59),  # a name nested in itself
    ("attn", 4_000, 7_000, 60),  # start/end range crossing "forward"
    ("tieA", 8_000, 9_500, 59),
    ("tieB", 8_000, 9_000, 59),  # same start as tieA, earlier end: innermost on ties
    ("open", 0, None, 59),  # never ended: excluded
)
# (launch start, launch end, tid, kernel duration); kernel durations are powers of two.
LAUNCHES = (
    (500, 510, 100, 10),  # step
    (1_200, 1_210, 100, 20),  # forward
    (1_550, 1_560, 100, 40),  # outer layer
    (1_700, 1_710, 100, 80),  # inner layer
    (4_500, 4_510, 100, 160),  # step, forward and attn enclose it: attn starts last
    (5_500, 5_510, 100, 320),  # attn
    (8_100, 8_200, 100, 640),  # tie: tieB
    (9_200, 9_300, 100, 1_280),  # tieA
    (2_450, 2_600, 100, 2_560),  # straddles the end of both layers: forward
    (1_700, 1_710, 101, 5_120),  # another thread without ranges
)
ORPHAN_NS = 10_240  # a kernel whose launch call was not captured


def nested_trace(version: str, extra_ranges=(), extra_launches=()) -> TraceBuilder:
    b = TraceBuilder(version)
    b.process(100)
    for i, (name, s, e, et) in enumerate(RANGES + tuple(extra_ranges)):
        kw = {"text": name} if i % 2 else {"text_id_for": name}
        b.nvtx(s, e, event_type=et, **kw)
    kernel_t = 20_000
    for corr, (s, e, tid, dur) in enumerate(LAUNCHES + tuple(extra_launches), start=1):
        b.runtime(s, e, tid=tid, corr=corr)
        b.kernel(kernel_t, kernel_t + dur, corr=corr, name=f"k{corr}")
        kernel_t += dur + 100
    b.kernel(kernel_t, kernel_t + ORPHAN_NS, corr=999, name="orphan")
    return b


def reference_for(extra_ranges=(), extra_launches=()) -> dict:
    ranges = [reference.Range(n, s, e, 100, 100) for n, s, e, _ in RANGES + tuple(extra_ranges)]
    launches, kernels = [], []
    t = 20_000
    for corr, (s, e, tid, dur) in enumerate(LAUNCHES + tuple(extra_launches), start=1):
        launches.append(reference.Launch(s, e, 100, tid, corr))
        kernels.append(reference.Kernel(t, t + dur, 100, corr))
        t += dur + 100
    kernels.append(reference.Kernel(t, t + ORPHAN_NS, 100, 999))
    return reference.attribution(kernels, launches, ranges)


@pytest.mark.parametrize("version", GENERATIONS)
def test_nested_overlapping_and_ties_by_hand(version, build):
    data = ok(analyze(build(nested_trace(version))), "nvtx_attribution")
    total = 20_470
    assert data["total_kernel_ns"] == total
    assert data["attributed_ns"] == total - 5_120 - ORPHAN_NS
    assert data["coverage"] == round(5_110 / total, 4)
    assert data["kernels_without_launch"] == 1
    assert data["kernels_outside_ranges"] == 1
    assert by_name(data) == {
        "step": (1, 10, 5_110),
        "forward": (2, 20 + 2_560, 20 + 2_560 + 40 + 80),
        "layer": (2, 120, 120),  # the inner layer's kernel is counted once
        "attn": (2, 480, 480),
        "tieA": (1, 1_280, 1_280 + 640),
        "tieB": (1, 640, 640),
    }
    row = next(r for r in data["ranges"] if r["name"] == "step")
    assert row["pct_of_kernel_time"] == round(100 * 5_110 / total, 2)
    assert data["top_level"] == [{"name": "step", "inclusive_kernel_ns": 5_110}]


def test_nested_trace_equals_reference(build):
    data = ok(analyze(build(nested_trace("2024.6"))), "nvtx_attribution")
    ref = reference_for()
    assert data["attributed_ns"] == ref["attributed"]
    assert data["kernels_without_launch"] == ref["without_launch"]
    assert {n: (c, ns) for n, (c, ns, _) in by_name(data).items()} == ref["own"]
    assert {n: incl for n, (_, _, incl) in by_name(data).items()} == ref["inclusive"]


def test_range_inside_two_crossing_ranges_counts_for_both(build):
    # "both" lies within "forward" (1000-5000) and "attn" (4000-7000), which cross.
    extra_r = (("both", 4_200, 4_400, 59),)
    extra_l = ((4_300, 4_310, 100, 20_480),)
    data = ok(analyze(build(nested_trace("2024.6", extra_r, extra_l))), "nvtx_attribution")
    got = by_name(data)
    assert got["both"] == (1, 20_480, 20_480)
    assert got["attn"][2] == 480 + 20_480
    assert got["forward"][2] == 2_700 + 20_480
    assert got["step"][2] == 5_110 + 20_480
    ref = reference_for(extra_r, extra_l)
    assert {n: incl for n, (_, _, incl) in got.items()} == ref["inclusive"]


@pytest.mark.parametrize("version", GENERATIONS)
def test_unended_range_is_not_a_container(version, tmp_path):
    data = ok(analyze(variants.null_ends(tmp_path / "t.sqlite", version)), "nvtx_attribution")
    assert by_name(data) == {"step": (1, 1_000, 1_000), "backward": (0, 0, 0)}
    assert data["coverage"] == 1.0


def test_phases_follow_the_nearest_named_ancestor(build):
    pm = PhaseMap.from_json({"fwd": ["forward"], "tail": ["re:^tie"]})
    data = ok(analyze(build(nested_trace("2024.6")), phase_map=pm), "nvtx_attribution")
    phases = {p["phase"]: (p["kernel_count"], p["kernel_ns"]) for p in data["phases"]}
    # forward's own kernels and the two layers nested in it; attn is not inside forward.
    assert phases == {"fwd": (4, 2_700), "tail": (2, 1_920)}


def test_disabled_by_option(build):
    report = analyze(build(nested_trace("2024.6")), nvtx_kernel_map=False)
    assert report.metrics["nvtx_attribution"].reason == "disabled by --no-nvtx-kernel-map"


def test_coverage_is_over_all_ranges_not_a_top_n(build):
    b = TraceBuilder("2024.6")
    for i in range(120):  # more distinct names than any top-N table shows
        t = i * 1_000
        b.nvtx(t, t + 500, text=f"range_{i}")
        b.runtime(t + 10, t + 20, corr=i + 1)
        b.kernel(t + 100, t + 110, corr=i + 1, name="k")
    b.kernel(200_000, 200_010, corr=10_000, name="k")  # no launch
    data = ok(analyze(build(b), top_n=5), "nvtx_attribution")
    assert data["attributed_ns"] == 1_200
    assert data["coverage"] == round(1_200 / 1_210, 4)
    assert len(data["ranges"]) == 120


@pytest.mark.parametrize("version", GENERATIONS)
def test_only_unended_ranges_attribute_nothing(version, build):
    b = TraceBuilder(version)
    b.nvtx(0, None, text="never_popped")
    b.runtime(10, 20, corr=1)
    b.kernel(30, 80, corr=1)
    report = analyze(build(b))
    data = ok(report, "nvtx_attribution")
    assert (data["total_kernel_ns"], data["attributed_ns"], data["coverage"]) == (50, 0, 0.0)
    assert data["kernels_outside_ranges"] == 1
    assert not any("internal error" in w for w in report.warnings)


def test_ranges_without_a_phase_have_phase_none(build):
    pm = PhaseMap.from_json({"fwd": ["forward"]})
    data = ok(analyze(build(nested_trace("2024.6")), phase_map=pm), "nvtx_attribution")
    phases = {r["name"]: r["phase"] for r in data["ranges"]}
    assert phases["forward"] == "fwd"
    assert phases["step"] is None
