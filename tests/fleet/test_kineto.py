"""fleet puts one-file-per-rank PyTorch profiler traces on one clock from their own wall-clock
origin (baseTimeNanoseconds, or epoch timestamps), not from their first kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsys_llm_explainer import fleet
from nsys_llm_explainer.fleet import inputs
from tests.fixtures.kineto.builder import KinetoBuilder

REAL_NS = 1_751_500_000_000_000_000  # wall-clock time of rank 0's first kernel
START_NS = [0, 1_000_000, 3_500_000]  # each rank's first kernel, after rank 0's (ns)
BASE_NS = [1_751_410_836_000_000_000, 1_751_410_829_000_000_000, 1_751_410_839_250_000_000]


def rank_trace(path: Path, rank: int, base: int | None) -> Path:
    """Rank `rank`: kernels from REAL_NS + START_NS[rank] on, written relative to `base`
    (PyTorch 2.x) or as epoch times (base None)."""
    first = REAL_NS + START_NS[rank] - (base or 0)
    b = KinetoBuilder(base_ns=first)
    b.top["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 3}
    if base is not None:
        b.top["baseTimeNanoseconds"] = base
    for i in range(4):
        t = 100_000 * i
        b.user(f"ProfilerStep#{i}", t, t + 90_000)
        b.launch("gemm", t + 1_000, t + 2_000, t + 50_000 if i == 0 else t + 3_000, t + 60_000, corr=i + 1)
    return b.write(path)


@pytest.mark.parametrize("relative", [True, False])
def test_ranks_are_aligned_by_their_wall_clock_origin(tmp_path, relative):
    for r in range(3):
        rank_trace(tmp_path / f"rank{r}.json", r, BASE_NS[r] if relative else None)
    result = fleet.run(inputs.collect([str(tmp_path)], [], None), jobs=1, use_cache=False)
    clock = result.doc["runs"][0]["clock"]
    assert clock["method"] == "session_start"
    source = "baseTimeNanoseconds" if relative else "absolute epoch timestamps"
    assert [d["origin_source"] for d in clock["domains"]] == [source] * 3
    paths = [t["path"] for t in result.doc["traces"]]
    # Rank r's first kernel (50 us into its first step) lands at START_NS[r] on the fleet axis
    # (0 = the earliest kernel of all ranks).
    first_in_file = {r: REAL_NS + START_NS[r] - (BASE_NS[r] if relative else 0) + 50_000 for r in range(3)}
    for d in clock["domains"]:
        r = int(Path(paths[d["trace_index"]]).stem[-1])
        assert first_in_file[r] + d["offset_ns"] == START_NS[r]
