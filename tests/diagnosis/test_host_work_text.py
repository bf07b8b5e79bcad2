"""The host-work evidence line reads one source at a time: each source's share, then what it is
in parentheses, sources separated by semicolons; a share that rounds to nothing is left out."""

from __future__ import annotations

from nsys_llm_explainer.diagnosis.evidence import host_work_lines

MS = 1_000_000


def test_each_source_is_one_item_with_its_words_after_its_share() -> None:
    hs = {
        "idle_ns": 40 * MS, "unnamed_ns": 10_000,  # 0.025%: rounds to nothing, not listed
        "sources": [
            {"name": "write", "kind": "os", "family": "file_io", "ns": 12 * MS},
            {"name": "cudaMemcpy", "kind": "cuda", "family": "sync", "ns": 10 * MS},
            {"name": "after cudaDeviceSynchronize", "kind": "cuda", "ns": 4 * MS},
        ],
        "families": [], "samples": [],
    }
    (line,) = host_work_lines(hs, kineto=False)
    # 12/40 = 30.0%, 10/40 = 25.0%, 4/40 = 10.0%
    assert line == (
        "what the launching thread was in during the 40.0 ms of host-caused idle time: "
        "`write` (OS call) 30.0% (file or network I/O); "
        "`cudaMemcpy` (CUDA call) 25.0% (a read-back or synchronize); "
        "after a blocking `cudaDeviceSynchronize` drained the GPU 10.0%"
    )
    hs["unnamed_ns"] = 8 * MS  # 20.0%
    assert host_work_lines(hs, kineto=False)[0].endswith("drained the GPU 10.0%; nothing recorded for 20.0%")
    hs["sources"].append({"name": "saxpy", "kind": "range", "ns": 10_000})  # 0.025%: not listed
    assert "saxpy" not in host_work_lines(hs, kineto=False)[0]
    hs["sources"] = [{"name": "aten::linear", "kind": "range", "inner": "aten::addmm", "ns": 6 * MS}]
    assert "`aten::linear` 15.0% (inside it mostly `aten::addmm`)" in host_work_lines(hs, kineto=False)[0]
