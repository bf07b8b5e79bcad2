"""The launch queue, waits found by timing, and the fusion and slow-rank changes, on small
hand-built traces whose expected values are worked out here, not by the code under test."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nsys_llm_explainer.graph import analyze as A
from nsys_llm_explainer.graph import changes as ch
from nsys_llm_explainer.graph.build import WAIT_QUEUE, WAIT_SYNC
from nsys_llm_explainer.graph.replay import replay
from nsys_llm_explainer.trace import formats
from tests.fixtures.builder import TraceBuilder

US = 1_000
DEPTH = 40
KERNELS = 120
KERNEL_NS = 100 * US
CALL_NS = 4 * US
RETURN_NS = 3 * US
LAT_NS = 5 * US


def _labels(g: object) -> ch.TaskLabels:
    return ch.TaskLabels(["gemm", "other"], np.where(g.d_kind == 0, 0, -1), lambda ids: [f"k{i}" for i in ids])


def _full_queue(tmp_path: Path) -> tuple[Path, list[int], list[int], list[int]]:
    """One stream of 100 us kernels launched every 5 us by a host that fills a queue of
    DEPTH: launch i >= DEPTH cannot return before kernel i - DEPTH has ended (plus 3 us).
    Returns the trace, the calls' and kernels' end times, and the calls that did wait."""
    b = TraceBuilder("2024.6")
    b.process(100)
    t, gpu = 0, 0
    call_ends, kernel_ends, waited = [], [], []
    for i in range(KERNELS):
        end = t + CALL_NS
        if i >= DEPTH and kernel_ends[i - DEPTH] + RETURN_NS > end:
            end = kernel_ends[i - DEPTH] + RETURN_NS
            waited.append(i)
        b.runtime(t, end, pid=100, corr=i + 1, name="cudaLaunchKernel_v7000")
        start = max(t + LAT_NS, gpu)
        gpu = start + KERNEL_NS
        b.kernel(start, gpu, pid=100, corr=i + 1, name="gemm_kernel")
        call_ends.append(end)
        kernel_ends.append(gpu)
        t = end + 1 * US
    b.runtime(t, gpu + RETURN_NS, pid=100, corr=KERNELS + 1, name="cudaDeviceSynchronize_v3020")
    path = tmp_path / "queue.sqlite"
    b.write(path)
    return path, call_ends, kernel_ends, waited


def test_calls_blocked_on_a_full_queue_wait_for_the_device(tmp_path: Path) -> None:
    path, call_ends, kernel_ends, waited = _full_queue(tmp_path)
    data = formats.open_trace(path, jobs=1)
    try:
        res = A.analyze(data, None, _labels, [ch.parse("kernel:gemm=2x")],
                        capture=[(100, 0, kernel_ends[-1] + RETURN_NS)])
    finally:
        data.close()
    g = res.graph
    q = g.w_kind == WAIT_QUEUE
    calls, freeing = g.w_dst[q], g.w_src[q]
    # every launch that waited is found (the first two past the depth found room at once), each
    # waiting for the kernel DEPTH launches before it
    assert waited == list(range(DEPTH + 2, KERNELS))
    assert g.counts["queue_depth"] == DEPTH and g.counts["queue_waits"] == len(waited)
    assert sorted(calls.tolist()) == waited and (freeing == calls - DEPTH).all()
    assert g.counts.get("slow_launch_calls", 0) == 0
    # the unchanged replay gives every call's end back
    assert (res.times.h_end[:KERNELS] == np.array(call_ends)).all()
    # Kernels twice as fast: a reference loop, with the queue's rule, gives the calls' ends.
    p, _, _ = ch.apply(ch.parse("kernel:gemm=2x"), g, res.params, _labels(g))
    t = replay(g, p)
    host, gpu, ends, kends = 0, 0, [], []
    for i in range(KERNELS):
        end = host + CALL_NS
        if i >= DEPTH:
            end = max(end, kends[i - DEPTH] + RETURN_NS)
        start = max(host + LAT_NS, gpu)
        gpu = start + KERNEL_NS // 2
        ends.append(end)
        kends.append(gpu)
        host = end + 1 * US
    assert t.h_end[:KERNELS].tolist() == ends and t.d_end.tolist() == kends
    row = next(c for c in res.changes if c.change == "kernel:gemm=2x")
    assert row.window_gain == kernel_ends[-1] - kends[-1]


def test_a_sync_without_its_stream_waits_for_what_it_returned_after(tmp_path: Path) -> None:
    """Two streams; a stream synchronize whose synchronization record is missing returned 4 us
    after the 300 us kernel on stream 13 ended: it is replayed as waiting for that kernel."""
    b = TraceBuilder("2024.6")
    b.process(100)
    b.runtime(0, 5 * US, pid=100, corr=1, name="cudaLaunchKernel_v7000")
    b.kernel(10 * US, 310 * US, pid=100, stream=13, corr=1, name="long_kernel")
    b.runtime(6 * US, 10 * US, pid=100, corr=2, name="cudaLaunchKernel_v7000")
    b.kernel(15 * US, 40 * US, pid=100, stream=7, corr=2, name="short_kernel")
    b.runtime(12 * US, 314 * US, pid=100, corr=3, name="cudaStreamSynchronize_v3020")
    path = tmp_path / "sync.sqlite"
    b.write(path)
    data = formats.open_trace(path, jobs=1)
    try:
        def labels(g: object) -> ch.TaskLabels:
            return ch.TaskLabels(["other"], np.full(g.n_device, -1),
                                 lambda ids: [data.kernel_names(ids)[int(i)] for i in ids])

        res = A.analyze(data, None, labels, [ch.parse("kernel:long_kernel=2x")], capture=[(100, 0, 314 * US)])
    finally:
        data.close()
    g = res.graph
    assert g.counts["syncs_without_stream"] == 1 and g.counts["waits_found_by_timing"] == 1
    (edge,) = np.flatnonzero(g.w_kind == WAIT_SYNC)
    assert g.d_stream[g.w_src[edge]] == 13 and g.h_ret[g.w_dst[edge]] == 4 * US
    row = next(c for c in res.changes if c.change == "kernel:long_kernel=2x")
    assert row.window_gain == 150 * US  # the synchronize returns 150 us earlier


def _fusable(tmp_path: Path) -> Path:
    """Per step: three elementwise kernels (5, 8, 6 us) launched back to back with 2 us of host
    work between the calls, a 50 us GEMM, then an elementwise kernel after 80 us of host work
    (too far from the run to join it) and a 40 us one (too long to count as short)."""
    b = TraceBuilder("2024.6")
    b.process(100)
    t, gpu, corr = 0, 0, 1
    plan = [("ew", 5, 2), ("ew", 8, 2), ("ew", 6, 2), ("gemm", 50, 2), ("ew", 4, 80), ("ew", 40, 2)]
    for _ in range(3):
        for name, us, gap in plan:
            t += gap * US
            b.runtime(t, t + 4 * US, pid=100, corr=corr, name="cudaLaunchKernel_v7000")
            start = max(t + 3 * US, gpu + 1 * US)
            gpu = start + us * US
            b.kernel(start, gpu, pid=100, corr=corr, name=f"{name}_kernel")
            t += 4 * US
            corr += 1
    path = tmp_path / "fuse.sqlite"
    b.write(path)
    return path


def test_fusion_runs_one_kernel_per_run(tmp_path: Path) -> None:
    data = formats.open_trace(_fusable(tmp_path), jobs=1)
    try:
        def labels(g: object) -> ch.TaskLabels:
            names = data.kernel_names(np.unique(g.d_name))
            ew = np.array(["ew" in names.get(int(i), "") for i in g.d_name])
            return ch.TaskLabels(["activation_elementwise", "gemm"], np.where(ew, 0, 1),
                                 lambda ids: [names.get(int(i), "") for i in ids])

        res = A.analyze(data, None, labels, capture=[(100, 0, 10**9)])
        g = res.graph
        p, _, touched = ch.apply(ch.Change("fusion"), g, res.params, labels(g))
    finally:
        data.close()
    dur = (g.d_dur // US).tolist()
    fused = (p.d_dur // US).tolist()
    # each step's first three kernels are one of 8 us (the longest); the rest as they were
    assert dur == [5, 8, 6, 50, 4, 40] * 3
    assert fused == [8, 0, 0, 50, 4, 40] * 3 and touched == 9
    runs = ch.fusion_runs(g, labels(g))
    assert runs.tolist() == [0, 0, 0, -1, -1, -1, 6, 6, 6, -1, -1, -1, 12, 12, 12, -1, -1, -1]
    gone = g.d_launch[[1, 2, 7, 8, 13, 14]]
    assert (p.h_own[gone] == 0).all() and (p.h_gap[gone] == 0).all()


def test_the_slow_rank_is_the_one_the_others_wait_for(tmp_path: Path) -> None:
    """Three ranks run the same all-reduce three times; rank 300 arrives last in the first two
    (by 30 us after rank 200, 20 us after rank 100), rank 200 in the third. Rank 300 is late by
    50 us in all, rank 200 by 5 us: rank 300 is the slow one, and each collective's wait shrinks
    by how late rank 300 was after the last of the others."""
    from nsys_llm_explainer.graph.peers import slow_rank

    b = TraceBuilder("2024.6")
    ar = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    starts = {100: (10, 200, 400), 200: (20, 190, 405), 300: (50, 220, 400)}  # us
    for dev, (pid, ss) in enumerate(starts.items()):
        b.process(pid)
        for s in ss:
            b.kernel(s * US, s * US + 500 * US, pid=pid, device=dev, name=ar)
    path = tmp_path / "ranks.sqlite"
    b.write(path)
    data = formats.open_trace(path, jobs=1)
    try:
        k = data.kernels()
        names = data.kernel_names(k.name_id)
        slow, by_row = slow_rank(data, np.array(["nccl" in names[int(i)] for i in k.name_id]))
        saving = by_row.at(np.arange(len(k)))
        got = {(int(p), int(s) // US): int(v) // US for p, s, v in zip(k.pid, k.start, saving, strict=True)}
    finally:
        data.close()
    assert slow == 300
    # waits: rank 100 40, 20, 5 us; rank 200 30, 30, 0; rank 300 0 (last), 0, 5
    # rank 300 was late by 30 us (first) and 20 us (second) after the latest other rank
    assert got == {(100, 10): 30, (100, 200): 20, (100, 400): 0, (200, 20): 30, (200, 190): 20,
                   (200, 405): 0, (300, 50): 0, (300, 220): 0, (300, 400): 0}
