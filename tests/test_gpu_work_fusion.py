"""fusion_candidates: chains found by hand and by a plain-loop reference n-gram counter."""

from __future__ import annotations

from collections import Counter

import numpy as np

from nsys_llm_explainer.metrics import fusion_candidates as fc
from tests.conftest import analyze, ok
from tests.fixtures.builder import TraceBuilder

DUR = {"A": 2_000, "B": 3_000, "C": 1_000, "L": 200_000}
GAP = 1_000


def chain_trace() -> TraceBuilder:
    """20 x (A B C L) on stream 7, 10 x (A L) after; stream 8 repeats A B but alternates with L."""
    b = TraceBuilder("2024.6")
    b.process(100)
    t = 0
    for seq in ["ABCL"] * 20 + ["AL"] * 10:
        for k in seq:
            b.kernel(t, t + DUR[k], stream=7, name=k)
            t += DUR[k] + GAP
    t = 0
    for _ in range(15):  # never linked: L between every pair on this stream
        for k in "AL":
            b.kernel(t, t + DUR[k], stream=8, name=k)
            t += DUR[k] + GAP
    return b


def test_chain_by_hand(build):
    d = ok(analyze(build(chain_trace())), "fusion_candidates")
    top = d["candidates"][0]
    assert top["kernels"] == ["A", "B", "C"]
    assert top["occurrences"] == 20
    assert top["kernel_ns"] == 20 * (DUR["A"] + DUR["B"] + DUR["C"])
    assert top["removable_gap_ns"] == 20 * 2 * GAP and top["avg_gap_ns"] == GAP
    # A occurs 20 + 10 times on stream 7 and 15 times on stream 8.
    assert top["first_kernel_count"] == 45 and top["proximity"] == round(20 / 45, 4)
    # A->B and B->C always extend to A->B->C: reported once, as the longer chain.
    assert [c["kernels"] for c in d["candidates"]] == [["A", "B", "C"]]


def reference_counts(streams: list[list[tuple[str, int, int]]], length: int) -> Counter:
    """Plain loops: windows of `length` linked kernels per stream."""
    out: Counter = Counter()
    for ks in streams:
        for i in range(len(ks) - length + 1):
            win = ks[i : i + length]
            linked = all(
                win[j][2] - win[j][1] <= fc.SHORT_KERNEL_NS
                and win[j + 1][2] - win[j + 1][1] <= fc.SHORT_KERNEL_NS
                and max(0, win[j + 1][1] - win[j][2]) <= fc.MAX_LINK_GAP_NS
                for j in range(length - 1)
            )
            if linked:
                out[tuple(w[0] for w in win)] += 1
    return out


def test_ngram_counts_match_reference_on_random_streams():
    rng = np.random.default_rng(7)
    n = 3_000
    names = rng.integers(0, 4, n)
    stream = rng.integers(0, 3, n)
    start = np.sort(rng.integers(0, 10_000_000, n))
    dur = rng.choice([1_000, 5_000, 40_000], n)
    streams = [
        [
            (int(names[i]), int(start[i]), int(start[i] + dur[i]))
            for i in np.flatnonzero(stream == s)
        ]
        for s in range(3)
    ]
    order = np.lexsort((start, stream))
    s_, st, en, du, nm = stream[order], start[order], (start + dur)[order], dur[order], names[order]
    gap = np.zeros(n, dtype=np.int64)
    gap[:-1] = np.clip(st[1:] - en[:-1], 0, None)
    link = np.zeros(n, dtype=bool)
    short = du <= fc.SHORT_KERNEL_NS
    link[:-1] = (s_[1:] == s_[:-1]) & short[1:] & short[:-1] & (gap[:-1] <= fc.MAX_LINK_GAP_NS)
    _, levels = fc._grams(nm.astype(np.int64), link, du, gap)
    for li, (p, g, ng) in enumerate(levels):
        length = li + fc.MIN_LEN
        got = Counter()
        counts = np.bincount(g, minlength=ng)
        first = {}
        for pos, code in zip(p.tolist(), g.tolist(), strict=True):
            first.setdefault(code, pos)
        for code, pos in first.items():
            got[tuple(int(nm[pos + j]) for j in range(length))] = int(counts[code])
        assert got == reference_counts(streams, length), length


def test_no_short_kernels_means_no_candidates(build):
    b = TraceBuilder("2024.6")
    b.process(100)
    for i in range(30):
        b.kernel(i * 100_000, i * 100_000 + 90_000, name="long_gemm")
    d = ok(analyze(build(b)), "fusion_candidates")
    assert d["candidates"] == [] and d["short_kernels"] == 0
