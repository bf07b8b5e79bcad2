"""memory_transfers: kinds, pageable async, synchronous copies on the launch thread, tiny ones."""

from __future__ import annotations

import pytest

from nsys_llm_explainer.analysis.busy import COPY_KINDS
from tests.conftest import GENERATIONS, analyze, ok, skipped, table
from tests.fixtures.builder import TraceBuilder

ASYNC, SYNC = "cudaMemcpyAsync_v3020", "cudaMemcpy_v3020"
PAGEABLE, PINNED, DEVICE = 0, 1, 2


def transfers_trace(version: str) -> TraceBuilder:
    b = TraceBuilder(version)
    b.process(100)
    b.runtime(100, 200, corr=1)  # thread 100 launches the kernel: it is the launch thread
    b.kernel(1_000, 2_000, corr=1, name="gemm")
    # (corr, api, tid, copy_kind, bytes, start, dur, src_kind, dst_kind)
    rows = (
        (10, ASYNC, 100, 1, 1_000_000, 10_000, 100_000, PAGEABLE, DEVICE),  # pageable async
        (11, ASYNC, 100, 1, 2_000_000, 200_000, 100_000, PINNED, DEVICE),
        (12, SYNC, 100, 2, 100, 400_000, 2_000, DEVICE, PAGEABLE),  # sync on launch thread
        (13, ASYNC, 100, 8, 8_000_000, 500_000, 10_000, DEVICE, DEVICE),
        (14, ASYNC, 100, 10, 4096, 600_000, 1_000, DEVICE, DEVICE),
        (16, SYNC, 101, 2, 10, 700_000, 1_000, DEVICE, PINNED),  # sync, other thread
    )
    for corr, api, tid, kind, nbytes, start, dur, src, dst in rows:
        b.runtime(start - 50, start + dur + 50, tid=tid, corr=corr, name=api)
        b.memcpy(
            start, start + dur, bytes=nbytes, copy_kind=kind, corr=corr, src_kind=src, dst_kind=dst
        )
    b.runtime(799_000, 800_000, corr=15, name="cudaMemsetAsync_v3020")
    b.memset(800_000, 800_500, bytes=64, corr=15)
    return b


@pytest.mark.parametrize("version", GENERATIONS)
def test_kinds_and_issues_by_hand(version, build):
    report = analyze(build(transfers_trace(version)))
    d = ok(report, "memory_transfers")
    assert d["kinds_from_enum"] is (version != "2022.2")
    kinds = {r["kind"]: r for r in d["by_kind"]}
    h2d = kinds["Host-to-Device"]
    assert (h2d["count"], h2d["bytes"], h2d["time_ns"]) == (2, 3_000_000, 200_000)
    assert h2d["achieved_gbps"] == pytest.approx(15.0)
    assert (kinds["Device-to-Host"]["count"], kinds["Device-to-Host"]["bytes"]) == (2, 110)
    assert kinds["Device-to-Device"]["achieved_gbps"] == pytest.approx(800.0)
    assert kinds["Peer-to-Peer"]["bytes"] == 4096
    assert (kinds["Memset"]["count"], kinds["Memset"]["time_ns"]) == (1, 500)
    assert d["transfer_count"] == 7
    assert d["pageable_async"] == {"count": 1, "bytes": 1_000_000, "time_ns": 100_000}
    s = d["sync_on_launch_thread"]
    assert (s["count"], s["bytes"], s["time_ns"], s["launch_threads"]) == (1, 100, 2_000, 1)
    assert d["tiny"]["count"] == 4  # 100 B, 4096 B, 10 B and the 64 B memset
    assert [b["count"] for b in d["size_buckets"]] == [4, 0, 1, 2, 0]
    issues = table(report, "memory_transfers", "memory_transfer_issues")
    assert sorted(zip(issues["issue"], issues["bytes"], strict=True)) == [
        ("pageable_async", 1_000_000),
        ("sync_on_launch_thread", 100),
    ]
    assert set(issues["api"]) == {"cudaMemcpyAsync", "cudaMemcpy"}


def test_builtin_kind_fallback_matches_enum_labels():
    import json
    from pathlib import Path

    enums = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "enums" / "2024.6.json").read_text())
    labels = {i: lab for i, _, lab in enums["ENUM_CUDA_MEMCPY_OPER"]}
    assert all(labels[i] == lab for i, lab in COPY_KINDS.items())
    mem = {i: n for i, n, _ in enums["ENUM_CUDA_MEM_KIND"]}
    assert mem[0].endswith("PAGEABLE")


def test_skipped_without_memory_tables(build):
    b = TraceBuilder("2024.6", omit=("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
    b.process(100)
    b.kernel(1, 2)
    assert "memcpy" in skipped(analyze(build(b)), "memory_transfers")


def test_no_runtime_table_notes_the_limit(build):
    b = TraceBuilder("2024.6", omit=("CUPTI_ACTIVITY_KIND_RUNTIME",))
    b.process(100)
    b.memcpy(0, 1000, bytes=10, copy_kind=1, src_kind=PAGEABLE)
    report = analyze(build(b))
    d = ok(report, "memory_transfers")
    assert d["pageable_async"]["count"] == 0
    assert any(
        "API calls of transfers unknown" in n for n in report.metrics["memory_transfers"].notes
    )
