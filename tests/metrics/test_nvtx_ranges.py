"""nvtx_ranges: names from text or textId, push/pop and start/end, NULL ends, phase maps."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.options import PhaseMap
from tests.conftest import GENERATIONS, analyze, ok, table
from tests.fixtures import variants
from tests.fixtures.builder import TraceBuilder


def by_name(data: dict) -> dict[str, tuple[int, int]]:
    return {r["name"]: (r["count"], r["total_ns"]) for r in data["ranges"]}


@pytest.mark.parametrize("version", GENERATIONS)
def test_mixed_text_and_text_id_are_one_name(version, tmp_path):
    data = ok(analyze(variants.mixed_text(tmp_path / "t.sqlite", version)), "nvtx_ranges")
    assert by_name(data) == {"forward": (2, 2_500), "backward": (1, 1_000), "optimizer": (1, 500)}
    assert [r["name"] for r in data["ranges"]] == ["forward", "backward", "optimizer"]
    fwd = data["ranges"][0]
    stats = (fwd["avg_ns"], fwd["p50_ns"], fwd["p90_ns"], fwd["max_ns"])
    assert stats == (1_250, 1_000, 1_500, 1_500)  # nearest rank of 1,000 and 1,500
    assert data["distinct_names"] == 3
    assert data["by_kind"] == {"push_pop": 4, "start_end": 0}


@pytest.mark.parametrize("version", GENERATIONS)
def test_null_ends_counted_and_excluded(version, tmp_path):
    report = analyze(variants.null_ends(tmp_path / "t.sqlite", version))
    data = ok(report, "nvtx_ranges")
    # step, forward (no end) and backward are ranges; the NvtxMark is not.
    assert data["range_count"] == 3
    assert data["unended_count"] == 1
    assert by_name(data) == {"step": (1, 8_000), "backward": (1, 3_000)}
    assert any("no end" in n for n in report.metrics["nvtx_ranges"].notes)
    assert any("nvtx_ranges: 1 ranges have no end" in line for line in report.limitations)


@pytest.mark.parametrize("version", GENERATIONS)
def test_push_pop_and_start_end_per_process(version, build):
    b = TraceBuilder(version)
    b.nvtx(0, 1_000, text="decode", pid=100)
    b.nvtx(2_000, 2_600, text="decode", pid=100, event_type=60)
    b.nvtx(0, 4_000, text_id_for="decode", pid=200, tid=201, event_type=60)
    b.nvtx(100, 200, text="marker", pid=100, event_type=34)  # a mark, not a range
    report = analyze(build(b))
    data = ok(report, "nvtx_ranges")
    assert data["by_kind"] == {"push_pop": 1, "start_end": 2}
    assert by_name(data) == {"decode": (3, 5_600)}
    rows = table(report, "nvtx_ranges", "nvtx_by_pid")
    assert [(int(r.pid), r.name, int(r.count), int(r.total_ns)) for r in rows.itertuples()] == [
        (100, "decode", 2, 1_600), (200, "decode", 1, 4_000),
    ]


PHASES = {
    "prefill": ["PREFILL", "re:^ctx_\\d+$"],
    "decode": ["decode", "re:step_[0-9]+"],
}


def test_phase_of_substring_regex_and_first_match():
    pm = PhaseMap.from_json(PHASES)
    assert pm.phase_of("model.Prefill") == "prefill"  # case-insensitive substring
    assert pm.phase_of("CTX_12") == "prefill"  # regex, case-insensitive
    assert pm.phase_of("ctx_12_tail") is None  # the regex is anchored
    assert pm.phase_of("Step_7") == "decode"
    assert pm.phase_of("prefill_then_decode") == "prefill"  # first match wins
    assert pm.phase_of("sampler") is None
    ordered = PhaseMap.from_json([["decode", "decode"], ["prefill", "prefill"]])
    assert ordered.phase_of("prefill_then_decode") == "decode"


@pytest.mark.parametrize("version", GENERATIONS)
def test_phase_totals(version, build):
    b = TraceBuilder(version)
    b.nvtx(0, 1_000, text="Prefill")
    b.nvtx(1_000, 1_300, text="step_1")
    b.nvtx(1_300, 1_500, text_id_for="decode_tail")
    b.nvtx(1_500, 1_600, text="ctx_3")
    b.nvtx(1_600, 1_700, text="sampler")
    data = ok(analyze(build(b), phase_map=PhaseMap.from_json(PHASES)), "nvtx_ranges")
    phases = {r["name"]: r["phase"] for r in data["ranges"]}
    assert phases == {"Prefill": "prefill", "step_1": "decode", "decode_tail": "decode",
                      "ctx_3": "prefill", "sampler": None}
    assert data["phases"] == [
        {"phase": "prefill", "ranges": 2, "total_ns": 1_100},
        {"phase": "decode", "ranges": 2, "total_ns": 500},
    ]
