"""The host-work evidence line reads one source at a time: each source's share, then what it is
in parentheses, sources separated by semicolons; a share that rounds to nothing is left out."""

from __future__ import annotations

from dataclasses import replace

from nsys_llm_explainer.analysis.host_sources import Source
from nsys_llm_explainer.diagnosis.evidence import host_work_lines
from nsys_llm_explainer.results.devices import HostSources

MS = 1_000_000


def test_each_source_is_one_item_with_its_words_after_its_share() -> None:
    hs = HostSources(
        idle_ns=40 * MS, unnamed_ns=10_000,  # 0.025%: rounds to nothing, not listed
        sources=(
            Source("write", "os", "file_io", 12 * MS),
            Source("cudaMemcpy", "cuda", "sync", 10 * MS),
            Source("after cudaDeviceSynchronize", "cuda", None, 4 * MS),
        ),
        families=(), samples=(),
    )
    (line,) = host_work_lines(hs, kineto=False)
    # 12/40 = 30.0%, 10/40 = 25.0%, 4/40 = 10.0%
    assert line == (
        "what the launching thread was in during the 40.0 ms of host-caused idle time: "
        "`write` (OS call) 30.0% (file or network I/O); "
        "`cudaMemcpy` (CUDA call) 25.0% (a read-back or synchronize); "
        "after a blocking `cudaDeviceSynchronize` drained the GPU 10.0%"
    )
    hs = replace(hs, unnamed_ns=8 * MS)  # 20.0%
    assert host_work_lines(hs, kineto=False)[0].endswith("drained the GPU 10.0%; nothing recorded for 20.0%")
    hs = replace(hs, sources=(*hs.sources, Source("saxpy", "range", None, 10_000)))  # 0.025%: not listed
    assert "saxpy" not in host_work_lines(hs, kineto=False)[0]
    hs = replace(hs, sources=(Source("aten::linear", "range", None, 6 * MS, inner="aten::addmm"),))
    assert "`aten::linear` 15.0% (inside it mostly `aten::addmm`)" in host_work_lines(hs, kineto=False)[0]
