"""fusion_candidates: frequent sequences of 2-8 short kernels that run back to back on the
same (process, device, stream), which one fused kernel could replace.

Kernels of one stream are sorted by start. Two neighbours are linked when both last at
most SHORT_KERNEL_NS and the idle gap between them (next start - previous end, clipped at
0) is at most MAX_LINK_GAP_NS. Every window of L linked kernels is one occurrence of the
L-gram of its names; L-gram codes are built exactly from (L-1)-gram codes and the next
name code with a hash factorization (O(n) per length, no per-kernel Python).

Occurrences do not overlap: of a chain's windows, the first one in each stream's sequence
is kept, then the next that starts after it ends, and so on (greedy left to right,
analysis/intervals.py), so "A A A A" holds "A A" twice and a chain never claims one kernel
twice nor more time than its kernels have. Per chain: occurrences, kernel time inside them,
removable overhead = the sum of the gaps inside the windows (what back-to-back launches
cost on the GPU that a fused kernel would not), and proximity = occurrences / all
occurrences of the chain's first kernel name, so a chain that follows its first kernel
only rarely is not over-reported. A chain whose every occurrence extends to the same
longer chain (left or right) is dropped in favour of the longer one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsys_llm_explainer.analysis.context import NO_KERNELS, Context
from nsys_llm_explainer.analysis.groups import group_codes, group_sum
from nsys_llm_explainer.analysis.intervals import non_overlapping
from nsys_llm_explainer.metrics.base import Metric
from nsys_llm_explainer.model import MetricResult, Outcome, Table
from nsys_llm_explainer.results.kernels import FusionCandidate, FusionCandidates
from nsys_llm_explainer.trace.columns import factorize, first_appearance_codes, narrow

SHORT_KERNEL_NS = 30_000
MAX_LINK_GAP_NS = 50_000
MIN_LEN, MAX_LEN = 2, 8
MIN_OCCURRENCES = 10
MIN_PROXIMITY = 0.05
JSON_ROWS = 50
CSV_ROWS = 1000
MAX_SHARED = 0.5  # a chain sharing more of its kernels with better-ranked chains is dropped
COLUMNS = (
    "rank",
    "length",
    "occurrences",
    "kernel_ns",
    "removable_gap_ns",
    "avg_gap_ns",
    "proximity",
    "first_kernel_count",
    "kernels",
)
SEP = " -> "


# Window start positions, gram code of each, gram count, and which windows are counted
# occurrences (non-overlapping; only for grams that can still be reported).
Level = tuple[np.ndarray, np.ndarray, int, np.ndarray]


def _grams(
    name: np.ndarray, link: np.ndarray, csum: np.ndarray, cgap: np.ndarray
) -> tuple[list[pd.DataFrame], list[Level]]:
    """`csum`, `cgap`: running sums of the kernels' durations and of the gaps after them
    (a leading 0), so that any window's sums are two lookups."""
    n = len(name)
    vocab = int(name.max()) + 1 if n else 1
    # Positions and codes fit in int32 below 2^31 kernels: the seven levels stay in
    # memory together, so halving them matters at millions of kernels.
    small = np.int32 if n < 2**31 else np.int64
    # run[i] = how many links follow i without a break (links i, i+1, ... all True): the
    # next break at or after i (the last kernel is one: it links to nothing) minus i.
    run: np.ndarray = np.where(link, n - 1, np.arange(n, dtype=small)).astype(small)
    run = np.minimum.accumulate(run[::-1])[::-1]
    np.subtract(run, np.arange(n, dtype=small), out=run)
    first_count = np.bincount(name, minlength=vocab)
    # Each level's positions are a subset of the previous level's (a window of L linked
    # kernels starts a window of L-1), so codes are carried aligned to the positions
    # instead of in kernel-sized arrays.
    p = np.arange(n, dtype=np.int64)
    code, ncode = name, vocab  # 1-gram codes
    frames: list[pd.DataFrame] = []
    levels: list[Level] = []
    extends: list[np.ndarray] = []  # per level: which windows go on to the next level
    for length in range(MIN_LEN, MAX_LEN + 1):
        m = run[p] >= length - 1
        p, code = p[m], code[m]
        if len(p) == 0:
            break
        code, ncode = first_appearance_codes(code.astype(np.int64) * vocab + name[p + length - 1], ncode * vocab)
        levels.append((p.astype(small), code.astype(small), ncode, np.zeros(0, dtype=bool)))
        extends.append(run[p] >= length)
    del run, p, code
    for li, (p, g, ng, _) in enumerate(levels):
        length = li + MIN_LEN
        # Overlapping windows are at least the non-overlapping ones: a gram with too few
        # windows cannot qualify, and only the others pay for the greedy selection.
        keep = np.bincount(g, minlength=ng) >= MIN_OCCURRENCES
        if li + 1 < len(levels):
            # Right extension: the next level's window starting at the same position (the
            # next level's positions are this level's with run >= length, in order). Left
            # extension: the one starting just before, which is the previous entry here.
            right = np.full(len(p), -1, dtype=small)
            right[extends[li]] = levels[li + 1][1]
            left = np.full(len(p), -1, dtype=small)
            if len(p) > 1:
                left[1:] = np.where(p[1:] - 1 == p[:-1], right[:-1], -1)
            for ext in (right, left):
                keep &= ~_same_extension(ext, g, ng)
            del right, left, ext
        rep = np.full(ng, -1, dtype=np.int64)
        rep[g[::-1]] = p[::-1]  # first occurrence of each gram (always a counted one)
        # Window sums only for the occurrences of grams that are kept (usually few).
        mine = np.flatnonzero(keep[g])
        counted = np.zeros(len(p), dtype=bool)
        counted[mine] = non_overlapping(p[mine], g[mine], length)
        mine = mine[counted[mine]]
        levels[li] = (p, g, ng, counted)
        pk, gk = p[mine].astype(np.int64), g[mine]
        occ = np.bincount(gk, minlength=ng)
        keep &= occ >= MIN_OCCURRENCES
        kern = group_sum(csum[pk + length] - csum[pk], gk, ng)
        gaps = group_sum(cgap[pk + length - 1] - cgap[pk], gk, ng)
        del mine, pk, gk
        sel = np.flatnonzero(keep)
        prox = occ[sel] / np.maximum(first_count[name[rep[sel]]], 1)
        frames.append(
            pd.DataFrame(
                {
                    "length": length,
                    "occurrences": occ[sel],
                    "kernel_ns": kern[sel],
                    "removable_gap_ns": gaps[sel],
                    "proximity": np.round(prox, 4),
                    "first_kernel_count": first_count[name[rep[sel]]],
                    "start_pos": rep[sel],
                    "gram": sel,
                }
            )
        )
    return frames, levels


def _same_extension(ext: np.ndarray, g: np.ndarray, ng: int) -> np.ndarray:
    """Per gram: every occurrence extends to the same longer gram (ext >= 0, all equal)."""
    first = np.full(ng, -1, dtype=np.int64)
    first[g[::-1]] = ext[::-1]  # the value at each gram's first occurrence
    differs = np.zeros(ng, dtype=bool)
    differs[g[ext != first[g]]] = True
    return (first >= 0) & ~differs


def _select(cand: pd.DataFrame, levels: list[Level], n: int) -> pd.DataFrame:
    """Keep candidates in rank order unless most of their kernels belong to one kept before.

    Overlapping windows of one long repeated sequence would otherwise fill the list with
    shifted copies of the same chain.
    """
    # Occurrence positions grouped by gram, for the candidates' grams only (usually a
    # few): one stable sort per level, over those occurrences alone.
    wanted: dict[int, np.ndarray] = {}
    for length, grams in cand.groupby("length", sort=True)["gram"]:
        wanted[int(length)] = grams.to_numpy(dtype=np.int64)
    sorted_levels: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for length, grams in wanted.items():
        p, g, ng, counted = levels[length - MIN_LEN]
        is_cand = np.zeros(ng, dtype=bool)
        is_cand[grams] = True
        mine = np.flatnonzero(is_cand[g] & counted)
        gm = g[mine]
        # A stable sort of 16-bit keys is a radix sort; the order is the same either way.
        order = np.argsort(gm.astype(np.int16) if ng <= 2**15 else gm, kind="stable")
        sorted_levels[length] = (
            p[mine[order]], np.r_[0, np.cumsum(np.bincount(gm, minlength=ng))]
        )
    claimed = np.zeros(n, dtype=bool)
    keep = []
    for row, (length, gram) in enumerate(
        zip(cand["length"].tolist(), cand["gram"].tolist(), strict=True)
    ):
        pos, bounds = sorted_levels[length]
        starts = pos[bounds[gram] : bounds[gram + 1]]
        cover = (starts[:, None] + np.arange(length)).ravel()
        if claimed[cover].mean() > MAX_SHARED:
            continue
        claimed[cover] = True
        keep.append(row)
        if len(keep) >= CSV_ROWS:
            break
    return cand.iloc[keep]


def run(ctx: Context) -> Outcome:
    k = ctx.data.kernels()
    if len(k) == 0:
        return METRIC.skipped(NO_KERNELS)
    # Millions of rows each: every array goes as soon as its last use is done.
    skey, _ = group_codes(k.pid, k.device, k.stream)
    order = np.lexsort((k.start, skey))
    s = skey[order]
    del skey
    name, name_uniq = factorize(k.name_id[order])
    name = narrow(name)
    st, en = k.start[order], k.end[order]
    del order
    dur = en - st
    short = dur <= SHORT_KERNEL_NS
    gap = np.zeros(len(s), dtype=np.int64)
    gap[:-1] = np.clip(st[1:] - en[:-1], 0, None)
    del st, en
    link = np.zeros(len(s), dtype=bool)
    link[:-1] = (s[1:] == s[:-1]) & short[1:] & short[:-1] & (gap[:-1] <= MAX_LINK_GAP_NS)
    del s
    short_kernels, short_ns = int(short.sum()), int(dur[short].sum())
    del short
    csum = np.r_[0, np.cumsum(dur)]
    del dur
    cgap = np.r_[0, np.cumsum(gap)]
    del gap
    frames, levels = _grams(name, link, csum, cgap)
    del link, csum, cgap
    cand = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if len(cand):
        cand = cand[cand["proximity"] >= MIN_PROXIMITY]
        cand = cand.sort_values(
            ["kernel_ns", "occurrences", "length"], ascending=[False, False, True], kind="stable"
        )
        cand = _select(cand, levels, len(name)).reset_index(drop=True)
        ids = np.asarray(name_uniq, dtype=np.int64)
        lookup = ctx.data.kernel_names(ids)
        labels = [lookup.get(int(i), f"(unnamed kernel #{int(i)})") for i in ids]
        cand["kernels"] = [
            SEP.join(labels[name[p + j]] for j in range(ln))
            for p, ln in zip(cand["start_pos"].tolist(), cand["length"].tolist(), strict=True)
        ]
        cand["avg_gap_ns"] = np.rint(
            cand["removable_gap_ns"] / (cand["occurrences"] * (cand["length"] - 1))
        ).astype(np.int64)
        cand.insert(0, "rank", np.arange(1, len(cand) + 1))
        cand = cand.drop(columns=["start_pos", "gram"])
    else:
        cand = pd.DataFrame(columns=list(COLUMNS))
    records = cand.head(JSON_ROWS).to_dict("records")
    for r in records:
        r["kernels"] = r["kernels"].split(SEP)
    result = FusionCandidates(
        short_kernel_ns=SHORT_KERNEL_NS,
        max_link_gap_ns=MAX_LINK_GAP_NS,
        min_occurrences=MIN_OCCURRENCES,
        min_proximity=MIN_PROXIMITY,
        short_kernels=short_kernels,
        short_kernel_ns_total=short_ns,
        candidates_found=int(len(cand)),
        candidates=tuple(FusionCandidate(**r) for r in records),
    )
    return MetricResult(METRIC.id, result.to_json(), (Table("fusion_candidates", COLUMNS, cand),), typed=result)


METRIC = Metric(
    id="fusion_candidates",
    order=240,
    run_after="ncu_plan",  # run right after it, not at its place: frees what they share sooner
    title="Kernel fusion candidates",
    run=run,
    tables={"fusion_candidates": COLUMNS},
    description=(
        "Frequent back-to-back chains of 2-8 short kernels on one stream, with "
        "removable launch gaps."
    ),
)
