"""The step graph's replay against deliberately simple references: chains evaluated one
node at a time, the whole replay as a node-by-node relaxation, and a hand-computed trace."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.graph import analyze as A
from nsys_llm_explainer.graph import changes as ch
from nsys_llm_explainer.graph.build import Graph
from nsys_llm_explainer.graph.replay import Params, replay
from nsys_llm_explainer.graph.scan import NEG, chain_ends
from nsys_llm_explainer.trace import formats
from tests.fixtures.builder import TraceBuilder

US = 1_000


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(-1, 400), st.booleans(), st.integers(-20, 100)),
                min_size=1, max_size=40))
def test_chain_ends_matches_a_loop(rows: list[tuple[int, int, bool, int]]) -> None:
    a = np.array([r[0] for r in rows], np.int64)
    b = np.array([NEG if r[1] < 0 else r[1] for r in rows], np.int64)
    first = np.array([r[2] for r in rows], bool)
    first[0] = True
    init = np.array([r[3] for r in rows], np.int64)
    expected, prev = [], 0
    for i in range(len(rows)):
        if first[i]:
            prev = int(init[i])
        prev = max(prev + int(a[i]), int(b[i]))
        expected.append(prev)
    assert chain_ends(a, b, first, init).tolist() == expected


def reference_replay(g: Graph, p: Params) -> tuple[list[int], list[int]]:
    """The replay's equations solved by sweeping every node in order until nothing moves."""
    hs = [0] * g.n_host
    he = [NEG] * g.n_host
    de = [NEG] * g.n_device
    active = [(int(s), int(d)) for s, d, a in zip(g.w_src, g.w_dst, p.w_active, strict=True) if a]
    for _ in range(10_000):
        before = (list(he), list(de))
        for i in range(g.n_host):
            if g.h_fixed[i]:
                hs[i], he[i] = int(g.h_start[i]), int(g.h_end[i])
                continue
            prev = 0 if g.h_first[i] else he[i - 1]
            hs[i] = prev + int(p.h_gap[i])
            waits = [de[s] + int(p.h_ret[i]) for s, d in active if d == i and de[s] > NEG // 2]
            he[i] = max([hs[i] + int(p.h_own[i]), *waits])
        for i in range(g.n_device):
            if g.d_fixed[i]:
                de[i] = int(g.d_end[i])
                continue
            c = hs[g.d_launch[i]] + int(p.d_lat[i]) if g.d_launch[i] >= 0 else 0
            c = max([c, *(de[s] for s, d in zip(g.x_src, g.x_dst, strict=True) if d == i)])
            start = c + int(p.d_pin[i])
            if not g.d_first[i]:
                start = max(start, de[i - 1] + int(p.d_queue[i]) + int(p.d_pin[i]))
            de[i] = start + int(p.d_dur[i])
        if (he, de) == before:
            return he, de
    raise AssertionError("reference replay did not settle")


def _trace(tmp_path: Path) -> Path:
    """Two streams, host work, a read-back with a synchronize, a blocking copy."""
    b = TraceBuilder("2024.6")
    b.process(100)
    rng = np.random.default_rng(3)
    t, corr = 1_000_000, 1
    free = {7: 0, 13: 0}
    for _step in range(6):
        for i in range(12):
            t += int(rng.integers(1, 30)) * US
            stream = 13 if i % 5 == 4 else 7
            b.runtime(t, t + 4 * US, pid=100, corr=corr, name="cudaLaunchKernel_v7000")
            start = max(t + 3 * US, free[stream] + 1 * US)
            free[stream] = start + int(rng.integers(2, 60)) * US
            b.kernel(start, free[stream], pid=100, stream=stream, corr=corr, name=f"gemm_{i % 3}")
            corr += 1
            t += 4 * US
        t += 5 * US
        b.runtime(t, t + 9 * US, pid=100, corr=corr, name="cudaMemcpyAsync_v3020")
        cs = max(t + 3 * US, free[7] + 1 * US)
        free[7] = cs + 2 * US
        b.memcpy(cs, free[7], bytes=4, copy_kind=2, src_kind=2, dst_kind=1, pid=100, stream=7, corr=corr)
        corr += 1
        t += 9 * US
        end = max(t + 2 * US, free[7] + 3 * US)
        b.runtime(t, end, pid=100, corr=corr, name="cudaStreamSynchronize_v3020")
        b.sync(t + 100, end - 100, pid=100, stream=7, corr=corr, sync_type=3)
        corr += 1
        t = end + 40 * US
    path = tmp_path / "t.sqlite"
    b.write(path)
    return path


def _labels(g: Graph) -> ch.TaskLabels:
    return ch.TaskLabels(["gemm", "other"], np.where(g.d_kind == 0, 0, -1), lambda ids: [f"gemm_{i}" for i in ids])


def test_replay_matches_the_reference_and_each_change_applies(tmp_path: Path) -> None:
    data = formats.open_trace(_trace(tmp_path), jobs=1)
    try:
        res = A.analyze(data, None, _labels, [ch.parse("kernel:gemm=2x")],
                        capture=[(100, int(data.runtime().start.min()), int(data.kernels().end.max()))])
        g = res.graph
        he, de = reference_replay(g, res.params)
        assert res.times.h_end.tolist() == he and res.times.d_end.tolist() == de
        # The sync waits for the read-back and the launch calls wait for nothing.
        assert len(g.w_src) == 6 and int(g.counts["host_waits"]) == 6
        for change in [ch.Change(k) for k in ch.BUILTIN] + [ch.parse("kernel:gemm=2x")]:
            p, _, touched = ch.apply(change, g, res.params, _labels(g))
            t = replay(g, p)
            he, de = reference_replay(g, p)
            assert t.h_end.tolist() == he and t.d_end.tolist() == de, change.key
        rows = {c.change: c for c in res.changes}
        assert rows["readbacks"].touched == 6 and rows["syncs"].touched == 0
        assert rows["kernel:gemm=2x"].gain[0] > 0 and rows["copies"].touched == 0
        # host+launch is host then launch: the same parameters as applying them in turn
        both, _, n_both = ch.apply(ch.Change("host+launch"), g, res.params, _labels(g))
        host, _, n_host = ch.apply(ch.Change("host"), g, res.params, _labels(g))
        seq, _, n_launch = ch.apply(ch.Change("launch"), g, host, _labels(g))
        assert n_both == n_host + n_launch > 0
        assert all((getattr(both, f) == getattr(seq, f)).all() for f in ("h_gap", "h_own", "d_dur", "w_active"))
        # a scenario from the command line is its parts applied together
        combo = ch.parse("host+kernel:gemm=2x")
        assert [p.key for p in combo.steps()] == ["host", "kernel:gemm=2x"]
        assert ch.apply(combo, g, res.params, _labels(g))[2] == n_host + rows["kernel:gemm=2x"].touched
    finally:
        data.close()


def test_what_if_text_is_checked() -> None:
    assert ch.parse("kernel:gemm=2x") == ch.Change("kernel:gemm=2x", "gemm", 2.0)
    assert ch.parse("kernel:flash_fwd=1.5x").factor == 1.5
    assert ch.parse("fusion") == ch.Change("fusion")
    combo = ch.parse("host+kernel:gemm=2x+syncs")
    assert combo.key == "host+kernel:gemm=2x+syncs"
    assert combo.parts == (ch.Change("host"), ch.Change("kernel:gemm=2x", "gemm", 2.0), ch.Change("syncs"))
    assert [c.key for c in ch.parse("host+launch").steps()] == ["host", "launch"]
    for bad in ("gemm=2x", "kernel:gemm", "kernel:gemm=0.5x", "kernel:=2x", "kernel:gemm=2", "host+gemm=2x",
                "hosts"):
        with pytest.raises(Exception, match="kernel:CATEGORY_OR_NAME=Kx|between 1"):
            ch.parse(bad)


def test_peer_waits_pair_runs_across_ranks(tmp_path: Path) -> None:
    """Two ranks run the same all-reduce three times; rank 200 reaches each one later."""
    from nsys_llm_explainer.graph.peers import UNKNOWN, peer_waits

    b = TraceBuilder("2024.6")
    ar = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    starts = {100: (10, 200, 400), 200: (50, 230, 400)}  # us
    for pid, dev in ((100, 0), (200, 1)):
        b.process(pid)
        for s in starts[pid]:
            b.kernel(s * US, 500 * US + s * US, pid=pid, device=dev, name=ar)
        b.kernel(900 * US, 950 * US, pid=pid, device=dev, name="gemm")
    b.kernel(990 * US, 999 * US, pid=100, name=ar.replace("AllReduce", "AllGather"))  # one rank only
    path = tmp_path / "peers.sqlite"
    b.write(path)
    data = formats.open_trace(path, jobs=1)
    try:
        k = data.kernels()
        names = data.kernel_names(k.name_id)
        comm = np.array(["nccl" in names[int(i)] for i in k.name_id])
        waits = peer_waits(data, comm).at(np.arange(len(k)))
        got = {(int(p), int(s) // US): int(w) for p, s, w in zip(k.pid, k.start, waits, strict=True)}
    finally:
        data.close()
    assert got == {(100, 10): 40 * US, (100, 200): 30 * US, (100, 400): 0, (200, 50): 0, (200, 230): 0,
                   (200, 400): 0, (100, 900): UNKNOWN, (200, 900): UNKNOWN, (100, 990): UNKNOWN}


def _two_streams(tmp_path: Path, record: bool, types: bool) -> Path:
    """A 300 us kernel on stream 13, then (issued 20 us later) a kernel on stream 7 that starts
    when it ends: through an event record/wait pair (record), or because 7 is the legacy
    default stream and 13 a blocking stream (types), or for no recorded reason."""
    b = TraceBuilder("2024.6")
    b.process(100)
    for i in range(4):  # ordinary launches: the launch latency is 3 us
        b.runtime(i * 2 * US, i * 2 * US + US, pid=100, corr=10 + i, name="cudaLaunchKernel_v7000")
        b.kernel(i * 2 * US + 3 * US, i * 2 * US + 4 * US, pid=100, stream=7, corr=10 + i, name="small")
    b.runtime(10 * US, 14 * US, pid=100, corr=1, name="cudaLaunchKernel_v7000")
    b.kernel(13 * US, 313 * US, pid=100, stream=13, corr=1, name="producer")
    b.runtime(15 * US, 16 * US, pid=100, corr=2, name="cudaEventRecord_v3020")
    b.runtime(17 * US, 18 * US, pid=100, corr=3, name="cudaStreamWaitEvent_v3020")
    b.sync(17 * US, 18 * US, pid=100, stream=7, corr=3, sync_type=2, event_id=9)
    b.runtime(30 * US, 34 * US, pid=100, corr=4, name="cudaLaunchKernel_v7000")
    b.kernel(313 * US, 325 * US, pid=100, stream=7, corr=4, name="consumer")
    if record:
        b.add_documented_row("CUPTI_ACTIVITY_KIND_CUDA_EVENT", {
            "timestamp": 0, "deviceId": 0, "contextId": 1, "greenContextId": None, "streamId": 13,
            "correlationId": 2, "globalPid": b.gpid(100), "eventId": 9, "eventSyncId": None})
    if types:
        for stream, flag in ((7, 3), (13, 1)):
            b.add_documented_row("TARGET_INFO_CUDA_STREAM", {
                "streamId": stream, "hwId": 0, "vmId": 0, "processId": 100, "contextId": 1, "priority": 0,
                "flag": flag})
    path = tmp_path / f"two_{record}_{types}.sqlite"
    b.write(path)
    return path


@pytest.mark.parametrize(("record", "types"), [(True, False), (False, True), (False, False)])
def test_cross_stream_edges(tmp_path: Path, record: bool, types: bool) -> None:
    data = formats.open_trace(_two_streams(tmp_path, record, types), jobs=1)
    try:
        res = A.analyze(data, None, _labels, capture=[(100, 0, 330 * US)])
        g, c = res.graph, res.graph.counts
        labels = ch.TaskLabels(["other"], np.full(g.n_device, -1),
                               lambda ids: [data.kernel_names(ids)[int(i)] for i in ids])
        p, _, _ = ch.apply(ch.parse("kernel:producer=2x"), g, res.params, labels)
    finally:
        data.close()
    consumer = int(np.flatnonzero(g.d_stream == 7)[-1])
    assert c["stream_wait_events"] == 1 and c["stream_wait_events_unrecovered"] == (0 if record else 1)
    # The default stream's rules link both ways: the producer waits for the small kernels
    # issued before it to the default stream, the consumer for the producer.
    assert c["default_stream_edges"] == (2 if types else 0)
    linked = record or types
    assert len(g.x_src) == (1 if record else 2 if types else 0)
    assert c["unexplained_waits"] == (0 if linked else 1)
    # Linked or kept as measured, the consumer starts when the producer has ended.
    assert res.times.d_start[consumer] == g.d_start[consumer]
    # Twice as fast a producer moves a linked consumer; an unexplained wait stays put.
    t = replay(g, p)
    moved = int(g.d_start[consumer] - t.d_start[consumer])
    assert moved == (150 * US if linked else 0)
