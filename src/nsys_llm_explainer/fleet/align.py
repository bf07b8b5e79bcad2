"""The collectives of a run's ranks: one clock for all ranks (align), then, on that clock, who
arrives last, how long the others wait, and which collectives are slow (analyze).

One clock:

1. Coarse: every trace says where its timestamp 0 lies on its host's wall clock
   (TraceData.clock_origin(): nsys TARGET_INFO_SESSION_START_TIME.utcEpochNs; Kineto
   baseTimeNanoseconds or absolute timestamps). Processes inside one trace share its clock
   exactly. Without an origin for every trace, the first kernel of each trace is taken as
   simultaneous (no trust).
2. Refinement: symmetric collectives (REFINE_KINDS) complete together on every rank, within
   a few microseconds, whatever time each rank arrived. For each trace other than the
   reference (the one holding rank 0), the median difference between the end times of its
   matched collectives and the reference rank's is its residual clock error, and is
   removed. The median absolute deviation of those differences is reported as the
   remaining uncertainty. Used only with at least MIN_MATCHED matched collectives, and, on
   recorded capture start times, only when the correction is below MAX_CORRECTION_NS: host
   clocks synchronized by NTP disagree by milliseconds, so a larger correction means the
   collectives matched are not the same ones (captures of different times or jobs).

Collectives are matched by key (kind, stream ordinal): the n-th stream a rank used for
communication, in order of its first collective, and the i-th collective of that kind on
it. An index shift between ranks (a capture that started a few collectives later) is
found as the most common offset between each collective and the nearest one in time on
the other rank.

Collective alignment (analyze): matched collectives (keyed/best_shift: same kind, same stream ordinal, i-th
occurrence) are compared on the fleet clock. A rank's arrival is the start of its
communication kernel (the kernel cannot start before the rank has issued it and its stream
has reached it). Per matched collective:

- skew = last arrival - first arrival;
- wait = sum over ranks of (last arrival - their arrival): GPU time the others spent inside
  the collective waiting for the last rank; it is charged to the last rank;
- transfer = median end - last arrival: how long the collective took once everyone was in.

Arrivals closer than TIE_NS count as a tie (no rank is charged): the clock alignment is not
better than that. A collective is slow when its transfer lies beyond the robust band
(robust.py) of its kind and is at least SLOW_RATIO x the kind's median."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NotRequired, TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer.fleet import robust
from nsys_llm_explainer.fleet.robust import Blame
from nsys_llm_explainer.fleet.worker import CollectiveArrays, Rank

REFINE_KINDS = frozenset({"AllReduce", "AllGather", "ReduceScatter", "AllToAll"})
TIE_NS = 2_000  # arrivals closer than this are a tie (analyze): what the refinement resolves
MIN_MATCHED = 8
SHIFT_WINDOW = 256
SHIFT_SAMPLE = 200  # pairs scored per candidate shift (evenly spread over the overlap)
CERTAIN_NS = 1_000  # ends agreeing this closely (MAD) are the match: stop searching
MAX_CORRECTION_NS = 1_000_000_000  # 1 s: beyond any host clock error

Key = tuple[str, int]


class Domain(TypedDict):
    """One clock domain (trace) of a run's `clock`."""
    trace_index: int
    ranks: int
    origin_source: str | None
    origin_ns: int | None
    offset_ns: int
    correction_ns: int | None
    residual_mad_ns: int | None
    matched: int


class ClockDoc(TypedDict):
    """fleet.json run `clock`."""
    method: str
    refined_by_collectives: bool
    trust_level: str
    trust: str
    zero_ns: int
    domains: list[Domain]


class KindStats(TypedDict):
    """One (kind, stream ordinal) of the collectives `kinds`."""
    kind: str
    stream_ordinal: int
    matched: int
    ranks: int
    skew_p50_ns: int
    skew_p99_ns: int
    skew_max_ns: int
    wait_ns: int
    transfer_p50_ns: int
    slow: int


class RankWait(TypedDict):
    """One rank of the collectives `ranks`."""
    rank: int
    arrived_last: int
    arrived_last_pct: float | None
    wait_caused_ns: int
    wait_suffered_ns: int


class Culprit(RankWait):
    share_of_wait_pct: float


class SlowCollective(TypedDict):
    kind: str
    stream_ordinal: int
    index: int
    transfer_ns: int
    ratio_to_median: float
    last_arrival_ns: int


class CollectivesDoc(TypedDict):
    """fleet.json run `collectives`: status "ok" with the analysis; "skipped" or "error" with
    the reason."""
    status: str
    reason: NotRequired[str]
    tie_ns: NotRequired[int]
    matched: NotRequired[int]
    charged: NotRequired[int]
    total_wait_ns: NotRequired[int]
    kinds: NotRequired[list[KindStats]]
    ranks: NotRequired[list[RankWait]]
    culprit: NotRequired[Culprit | None]
    blame: NotRequired[Blame | None]
    slow_count: NotRequired[int]
    slow: NotRequired[list[SlowCollective]]


@dataclass
class Clock:
    offsets: list[int]  # per rank: add to its timestamps to get fleet time (ns)
    doc: ClockDoc  # fleet.json `clock`


def keyed(coll: CollectiveArrays) -> dict[Key, np.ndarray]:
    """(kind, stream ordinal) -> indices of that rank's collectives, in time order."""
    n = len(coll["start"])
    if n == 0:
        return {}
    stream = coll["stream"]
    first: dict[int, int] = {}
    for i, s in enumerate(stream.tolist()):
        first.setdefault(s, i)
    ordinal = {s: o for o, s in enumerate(sorted(first, key=first.__getitem__))}
    ords = np.array([ordinal[s] for s in stream.tolist()], dtype=np.int64)
    kinds = coll["kinds"]
    out: dict[Key, np.ndarray] = {}
    for code in np.unique(coll["kind"]).tolist():
        for o in np.unique(ords).tolist():
            idx = np.flatnonzero((coll["kind"] == code) & (ords == o))
            if len(idx):
                out[(kinds[code], o)] = idx
    return out


def _nearest_shift(ref_end: np.ndarray, end: np.ndarray) -> int:
    """Most common index offset between each collective and the nearest reference one in time."""
    pos = np.clip(np.searchsorted(ref_end, end), 1, max(len(ref_end) - 1, 1))
    left = np.clip(pos - 1, 0, len(ref_end) - 1)
    right = np.clip(pos, 0, len(ref_end) - 1)
    nearest = np.where(np.abs(ref_end[left] - end) <= np.abs(ref_end[right] - end), left, right)
    d = np.arange(len(end)) - nearest
    lo = int(d.min())
    counts = np.bincount(d - lo)
    best = np.flatnonzero(counts == counts.max()) + lo
    return int(best[np.argmin(np.abs(best))])


def best_shift(ref_end: np.ndarray, end: np.ndarray) -> int:
    """s such that collective j of the reference matches collective j + s of the other.

    Matched collectives end together, so the right shift is the one whose end-time
    differences are the most constant (smallest median absolute deviation, scored on up to
    SHIFT_SAMPLE pairs). Shifts within SHIFT_WINDOW of the nearest-in-time estimate are
    tried: the coarse clocks may be off by more than the spacing of collectives, but not by
    more than SHIFT_WINDOW of them."""
    if len(ref_end) == 0 or len(end) == 0:
        return 0
    s0 = _nearest_shift(ref_end, end)
    need = max(1, min(len(ref_end), len(end)) // 2)
    best, best_score = s0, None
    for s in sorted(range(s0 - SHIFT_WINDOW, s0 + SHIFT_WINDOW + 1), key=lambda x: (abs(x - s0), x)):
        j, k = pairs(ref_end, end, s)
        if len(j) < need:
            continue
        pick = np.linspace(0, len(j) - 1, min(len(j), SHIFT_SAMPLE)).astype(np.int64)
        d = ref_end[j[pick]] - end[k[pick]]
        score = float(np.median(np.abs(d - np.median(d))))
        if best_score is None or score < best_score:
            best, best_score = s, score
        if score <= CERTAIN_NS:
            break
    return best


def pairs(ref: np.ndarray, other: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (into ref, into other) for the shift."""
    j = np.arange(len(ref))
    k = j + shift
    ok = (k >= 0) & (k < len(other))
    return j[ok], k[ok]


def _domain_origin(ranks: list[Rank], members: list[int]) -> int | None:
    vals = {ranks[i]["clock"]["origin_ns"] for i in members}
    return vals.pop() if len(vals) == 1 and None not in vals else None


def _refine(ref: Rank, other: Rank, off_ref: int, off_other: int) -> tuple[int, int, int] | None:
    """(correction to add to `other`, MAD, matched) from symmetric collective end times."""
    a, b = keyed(ref["collectives"]), keyed(other["collectives"])
    diffs = []
    for key in sorted(set(a) & set(b)):
        if key[0] not in REFINE_KINDS:
            continue
        ra = ref["collectives"]["end"][a[key]] + off_ref
        rb = other["collectives"]["end"][b[key]] + off_other
        j, k = pairs(ra, rb, best_shift(ra, rb))
        diffs.append(ra[j] - rb[k])
    if not diffs:
        return None
    d = np.concatenate(diffs)
    if len(d) < MIN_MATCHED:
        return None
    corr = int(np.median(d))
    return corr, int(np.median(np.abs(d - corr))), int(len(d))


def align(ranks: list[Rank]) -> Clock:
    domains: dict[int, list[int]] = {}
    for i, r in enumerate(ranks):
        domains.setdefault(r["trace_index"], []).append(i)
    origins = {d: _domain_origin(ranks, m) for d, m in domains.items()}
    if len(domains) == 1:
        method = "shared_clock"
        base = {d: 0 for d in domains}
    elif all(v is not None for v in origins.values()):
        method = "session_start"
        base = {d: int(v) for d, v in origins.items()}  # type: ignore[arg-type]
    else:
        method = "first_kernel"
        base = {d: -min(ranks[i]["window_start_ns"] for i in m) for d, m in domains.items()}
    ref_domain = ranks[0]["trace_index"]
    corrections: dict[int, tuple[int, int, int] | None] = {d: None for d in domains}
    for d, members in domains.items():
        if d == ref_domain:
            continue
        ref_rank = ranks[domains[ref_domain][0]]
        corrections[d] = _refine(ref_rank, ranks[members[0]], base[ref_domain], base[d])
    rejected = {}
    if method == "session_start":
        for d, c in corrections.items():
            if c is not None and abs(c[0]) > MAX_CORRECTION_NS:
                rejected[d] = c[0]
                corrections[d] = None
    fix = {d: c if c is not None else (0, 0, 0) for d, c in corrections.items()}
    offs = {d: base[d] + fix[d][0] for d in domains}
    zero = min(r["window_start_ns"] + offs[r["trace_index"]] for r in ranks)
    refined = [c for c in corrections.values() if c is not None]
    trust = _trust(method, refined, len(domains))
    doc: ClockDoc = {
        "method": method,
        "refined_by_collectives": bool(refined),
        "trust_level": trust.split(":", 1)[0],
        "trust": trust + (
            f"; a correction by collective end times of up to {max(abs(v) for v in rejected.values()) / 1e9:,.3f} s "
            "was not applied: no host clock is that far off, so the collectives matched are not the same ones"
            if rejected else ""),
        "zero_ns": int(zero),
        "domains": [
            {
                "trace_index": d,
                "ranks": len(m),
                "origin_source": ranks[m[0]]["clock"]["source"],
                "origin_ns": origins[d],
                "offset_ns": int(offs[d] - zero),
                "correction_ns": fix[d][0] if corrections[d] is not None else None,
                "residual_mad_ns": fix[d][1] if corrections[d] is not None else None,
                "matched": fix[d][2],
            }
            for d, m in sorted(domains.items())
        ],
    }
    return Clock([int(offs[r["trace_index"]] - zero) for r in ranks], doc)


def _trust(method: str, refined: list[tuple[int, int, int]], ndomains: int) -> str:
    if method == "shared_clock":
        return "exact: all ranks come from one capture and share its clock"
    if refined and len(refined) == ndomains - 1:
        worst = max(c[1] for c in refined)
        text = (f"high: clocks refined by the end times of matched collectives; residual spread "
                f"{worst / 1000:.1f} us (MAD); arrivals closer than {TIE_NS / 1000:g} us count as ties")
        if 3 * worst > TIE_NS:
            text += (f", and differences below about {3 * worst / 1000:.1f} us (3 x the residual MAD) "
                     "are within the clock uncertainty")
        return text
    if method == "session_start":
        return ("medium: host wall clocks at capture start; as good as the hosts' clock "
                "synchronization (NTP: typically 0.1-10 ms), so smaller skews are not resolved")
    return ("low: the traces do not record when they started; each trace's first kernel is "
            "taken as simultaneous, so skews between traces are not trustworthy")


SLOW_RATIO = 1.5
MAX_SLOW_LISTED = 20
COLUMNS = ("kind", "stream_ordinal", "index", "ranks", "first_arrival_ns", "last_arrival_ns",
           "last_rank", "skew_ns", "wait_ns", "transfer_ns", "slow")


def _matrix(ranks: list[Rank], offsets: list[int], key: tuple[str, int],
            members: list[int], idx: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Arrival and end matrices (collectives x members), NaN where a rank lacks one."""
    ref = members[0]
    ref_end = ranks[ref]["collectives"]["end"][idx[ref]] + offsets[ref]
    n = len(ref_end)
    arr = np.full((n, len(members)), np.nan)
    end = np.full((n, len(members)), np.nan)
    for col, r in enumerate(members):
        c = ranks[r]["collectives"]
        s = c["start"][idx[r]] + offsets[r]
        e = c["end"][idx[r]] + offsets[r]
        j, k = pairs(ref_end, e, best_shift(ref_end, e))
        arr[j, col] = s[k]
        end[j, col] = e[k]
    return arr, end


def analyze(ranks: list[Rank], offsets: list[int],
            k: float = robust.K) -> tuple[CollectivesDoc, pd.DataFrame]:
    keys: dict[tuple[str, int], dict[int, np.ndarray]] = {}
    for r, rank in enumerate(ranks):
        for key, found in keyed(rank["collectives"]).items():
            keys.setdefault(key, {})[r] = found
    frames = []
    nr = len(ranks)
    last_count = np.zeros(nr, dtype=np.int64)
    caused = np.zeros(nr, dtype=np.int64)
    suffered = np.zeros(nr, dtype=np.int64)
    charged_in = np.zeros(nr, dtype=np.int64)  # charged collectives each rank took part in
    chance_sum = np.zeros(nr, dtype=np.float64)  # sum over them of 1 / ranks present
    kinds: list[KindStats] = []
    for key in sorted(keys):
        idx = keys[key]
        members = sorted(idx)
        if len(members) < 2:
            continue
        arr, end = _matrix(ranks, offsets, key, members, idx)
        present = ~np.isnan(arr)
        ok = present.sum(axis=1) >= 2
        arr, end, present = arr[ok], end[ok], present[ok]
        if len(arr) == 0:
            continue
        hi = np.nanmax(arr, axis=1)
        lo = np.nanmin(arr, axis=1)
        last_col = np.nanargmax(arr, axis=1)
        waits = np.where(present, hi[:, None] - arr, 0.0)
        wait = waits.sum(axis=1)
        transfer = np.maximum(np.nanmedian(end, axis=1) - hi, 0.0)
        skew = hi - lo
        charged = skew >= TIE_NS
        m = np.asarray(members)
        last_rank = m[last_col]
        np.add.at(last_count, last_rank[charged], 1)
        np.add.at(caused, last_rank[charged], np.rint(wait[charged]).astype(np.int64))
        np.add.at(suffered, m, np.rint(waits.sum(axis=0)).astype(np.int64))
        took_part = present[charged]
        charged_in[m] += took_part.sum(axis=0)
        chance_sum[m] += (took_part / took_part.sum(axis=1, keepdims=True)).sum(axis=0)
        med, _, upper = robust.band(transfer)
        slow = (transfer > upper) & (transfer >= SLOW_RATIO * med)
        frames.append(pd.DataFrame({
            "kind": key[0], "stream_ordinal": key[1], "index": np.flatnonzero(ok),
            "ranks": present.sum(axis=1), "first_arrival_ns": np.rint(lo).astype(np.int64),
            "last_arrival_ns": np.rint(hi).astype(np.int64),
            "last_rank": np.where(charged, last_rank, -1),
            "skew_ns": np.rint(skew).astype(np.int64), "wait_ns": np.rint(wait).astype(np.int64),
            "transfer_ns": np.rint(transfer).astype(np.int64), "slow": slow,
        }))
        sk = np.rint(skew).astype(np.int64)
        kinds.append({
            "kind": key[0], "stream_ordinal": key[1], "matched": int(len(arr)),
            "ranks": len(members),
            "skew_p50_ns": int(np.percentile(sk, 50, method="closest_observation")),
            "skew_p99_ns": int(np.percentile(sk, 99, method="closest_observation")),
            "skew_max_ns": int(sk.max()),
            "wait_ns": int(np.rint(wait.sum())),
            "transfer_p50_ns": int(np.rint(med)),
            "slow": int(slow.sum()),
        })
    table = (pd.concat(frames, ignore_index=True) if frames
             else pd.DataFrame({c: pd.Series(dtype="int64") for c in COLUMNS}))
    table = table.loc[:, list(COLUMNS)]
    total_wait = int(np.rint(table["wait_ns"].sum())) if len(table) else 0
    matched = int(len(table))
    charged_n = int((table["last_rank"] >= 0).sum()) if matched else 0
    per_rank: list[RankWait] = [
        {"rank": r, "arrived_last": int(last_count[r]),
         "arrived_last_pct": round(100.0 * last_count[r] / charged_n, 2) if charged_n else None,
         "wait_caused_ns": int(caused[r]), "wait_suffered_ns": int(suffered[r])}
        for r in range(nr)
    ]
    verdict = robust.judge(last_count, charged_in, chance_sum, caused, k) if caused.sum() > 0 else None
    culprit: Culprit | None = None
    if verdict is not None and verdict["stands_out"]:
        r = verdict["rank"]
        culprit = {**per_rank[r], "share_of_wait_pct": round(100.0 * caused[r] / total_wait, 2)}
    slow_rows = table[table["slow"]] if matched else table
    slow_rows = slow_rows.assign(excess=slow_rows["transfer_ns"]).sort_values(
        ["excess", "kind", "stream_ordinal", "index"], ascending=[False, True, True, True], kind="stable")
    median_of = {(k["kind"], k["stream_ordinal"]): max(int(k["transfer_p50_ns"]), 1) for k in kinds}
    doc: CollectivesDoc = {
        "status": "ok",
        "tie_ns": TIE_NS,
        "matched": matched,
        "charged": charged_n,
        "total_wait_ns": total_wait,
        "kinds": kinds,
        "ranks": per_rank,
        "culprit": culprit,
        "blame": verdict,
        "slow_count": int(table["slow"].sum()) if matched else 0,
        "slow": [
            {"kind": str(x.kind), "stream_ordinal": int(x.stream_ordinal), "index": int(x.index),
             "transfer_ns": int(x.transfer_ns),
             "ratio_to_median": round(float(x.transfer_ns) / median_of[(str(x.kind), int(x.stream_ordinal))], 2),
             "last_arrival_ns": int(x.last_arrival_ns)}
            for x in slow_rows.head(MAX_SLOW_LISTED).itertuples()
        ],
    }
    return doc, table
