"""fusion_candidates: chains found by hand, by a plain-loop reference n-gram counter, and
non-overlapping occurrences against a plain-loop greedy."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsys_llm_explainer.analysis.intervals import non_overlapping
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
    for li, (p, g, ng, _) in enumerate(levels):
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


def test_repeated_kernel_counts_each_kernel_once(build):
    # 30 identical short kernels back to back: 29 overlapping "A A" windows, but only 15
    # occurrences that share no kernel; their time is the 30 kernels' time, not 29 * 2.
    b = TraceBuilder("2024.6")
    b.process(100)
    for i in range(30):
        b.kernel(i * 3_000, i * 3_000 + DUR["A"], stream=7, name="A")
    d = ok(analyze(build(b)), "fusion_candidates")
    top = d["candidates"][0]
    assert top["kernels"] == ["A", "A"]
    assert (top["occurrences"], top["kernel_ns"]) == (15, 30 * DUR["A"])
    assert top["removable_gap_ns"] == 15 * GAP and top["proximity"] == round(15 / 30, 4)
    # "A A A" (10 occurrences, the same 30 kernels) shares all its kernels with "A A".
    assert len(d["candidates"]) == 1


def reference_greedy(windows: list[tuple[int, int]], length: int) -> list[bool]:
    """Plain loop: per group, keep a window when it starts at or after the last kept end."""
    keep = [False] * len(windows)
    end: dict[int, int] = {}
    for i in sorted(range(len(windows)), key=lambda i: (windows[i][1], windows[i][0])):
        pos, group = windows[i]
        if pos >= end.get(group, -1):
            keep[i] = True
            end[group] = pos + length
    return keep


@settings(max_examples=200)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 3)), max_size=80, unique=True),
    st.integers(1, 8),
)
def test_non_overlapping_equals_plain_greedy(windows, length):
    pos = np.array([w[0] for w in windows], dtype=np.int64)
    group = np.array([w[1] for w in windows], dtype=np.int64)
    got = non_overlapping(pos, group, length).tolist()
    assert got == reference_greedy(windows, length)


def reference_occurrences(
    streams: list[list[tuple[str, int, int]]], chain: tuple[str, ...]
) -> tuple[int, int, list[tuple[int, int]]]:
    """Plain loops: linked windows of `chain` per stream, kept greedily left to right;
    (occurrences, kernel time, the (stream, index) of every kernel counted)."""
    length = len(chain)
    occ, kern, used = 0, 0, []
    for si, ks in enumerate(streams):
        i = 0
        while i + length <= len(ks):
            win = ks[i : i + length]
            linked = all(
                win[j][2] - win[j][1] <= fc.SHORT_KERNEL_NS
                and win[j + 1][2] - win[j + 1][1] <= fc.SHORT_KERNEL_NS
                and max(0, win[j + 1][1] - win[j][2]) <= fc.MAX_LINK_GAP_NS
                for j in range(length - 1)
            )
            if linked and tuple(w[0] for w in win) == chain:
                occ += 1
                kern += sum(e - s for _, s, e in win)
                used += [(si, i + j) for j in range(length)]
                i += length
            else:
                i += 1
    return occ, kern, used


SLOW = settings(
    max_examples=30,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SLOW
@given(
    st.lists(
        # Mostly short kernels of two names, so most examples report chains (the 40 us
        # kernel breaks links); "A" repeats, so overlapping windows are common.
        st.lists(
            st.tuples(st.sampled_from("AAB"), st.sampled_from([1_000, 2_000] * 3 + [40_000])),
            min_size=30,
            max_size=100,
        ),
        min_size=1, max_size=2,
    )
)
def test_chains_never_count_a_kernel_twice(build, streams_spec):
    b = TraceBuilder("2024.6")
    b.process(100)
    streams = []
    for si, spec in enumerate(streams_spec):
        t, ks = 0, []
        for name, dur in spec:
            b.kernel(t, t + dur, stream=10 + si, name=name)
            ks.append((name, t, t + dur))
            t += dur + GAP
        streams.append(ks)
    d = ok(analyze(build(b)), "fusion_candidates")
    for c in d["candidates"]:
        chain = tuple(c["kernels"])
        names = set(chain)
        total_of_names = sum(e - s for ks in streams for n, s, e in ks if n in names)
        assert c["kernel_ns"] <= total_of_names
        occ, kern, used = reference_occurrences(streams, chain)
        assert len(used) == len(set(used))  # the reference itself never reuses a kernel
        assert (c["occurrences"], c["kernel_ns"]) == (occ, kern)
        assert c["occurrences"] * len(chain) <= sum(len(ks) for ks in streams)
