"""Whether the traces of a run are captures of one job at one time: checked before their clocks
are aligned and their ranks compared.

- Time: each capture's window on the wall clock is its clock origin (TraceData.clock_origin:
  nsys TARGET_INFO_SESSION_START_TIME, Kineto baseTimeNanoseconds) plus its first kernel start
  to its last kernel end. Captures of one job overlap in time; when the latest start is after
  the earliest end by more than CLOCK_SLACK_NS (far beyond host clock synchronization), they
  never ran together. Processes inside one trace share its clock and always overlap. Without
  a clock origin on every trace the overlap cannot be checked (a caution).
- Job: traces that record their world size (trace.distributed) and differ in it come from
  different jobs; two traces that both record the same rank of the same world are two captures
  of one rank, not two ranks.
- GPUs: different GPU models among the ranks are a caution (a mixed cluster, or another job).
- Program: the traces' contents say whether the ranks run one program (program_evidence(): kernel
  names in common, the same collectives in the same numbers, the world size); captures of
  different programs are refused like captures that never overlapped. This is the only
  check of a set whose captures record no clock origin.

A run that fails a check is refused: its ranks are listed but not aligned or compared, unless
the user forces it (--force-align). A forced alignment has low trust whatever the clocks say.

Whether the traces of a run are captures of one program: the evidence in their contents.

Clock origins say whether captures ran at the same time (same_run.py); without them, and even
with them, the contents say whether the ranks run one program. Each rank of a trace set is
compared with the first rank of the first trace (the reference):

- kernel names: the share of each one's kernel time in names the other ran too (its top
  names, extract.TOP_NAMES). Ranks of one job run the same kernels; under MIN_NAME_SHARE on
  either side they are captures of different programs (refused), under NAME_CAUTION a caution
  (ranks of a pipeline run some stages' kernels only).
- collectives: the number of communication kernels of each kind. Every rank of a job joins
  its collectives: a rank that ran none beside ranks that ran some, or counts of one kind
  more than COUNT_RATIO apart, are captures of different programs (or of different steps);
  over COUNT_CAUTION apart, a caution (a capture edge cuts a few). Message sizes are not in
  kernel records: they are not checked, and that is said.
- world size: more ranks than the world size every trace records is not one job; fewer is
  a caution (a subset of the ranks).

Only runs of several traces are checked: the processes of one trace share its capture.
Each check gives a row (`id`, `verdict` same/differs/unknown, `blocking`, `detail`) in the
run's comparability `evidence`; a blocking one is also among its `reasons`."""

from __future__ import annotations

import datetime as dt
from typing import TypedDict

from nsys_llm_explainer import fmt
from nsys_llm_explainer.fleet.align import ClockDoc, CollectivesDoc
from nsys_llm_explainer.fleet.worker import Rank

MIN_NAME_SHARE = 0.5
NAME_CAUTION = 0.9
COUNT_RATIO = 2.0
COUNT_CAUTION = 1.1


class Evidence(TypedDict):
    """One check of a run's comparability `evidence`."""
    id: str
    verdict: str  # same, differs or unknown
    blocking: bool
    detail: str


class Capture(TypedDict):
    """One trace of a run: its clock origin and wall-clock window (comparability `captures`)."""
    trace_index: int
    path: str
    ranks: int
    origin_ns: int | None
    origin_source: str | None
    wall_start_ns: int | None
    wall_end_ns: int | None
    world_size: int | None
    rank: int | None
    gpus: list[str]


class Comparability(TypedDict):
    """fleet.json run `comparability`."""
    comparable: bool
    refused: bool
    forced: bool
    reasons: list[str]
    cautions: list[str]
    overlap_ns: int | None
    evidence: list[Evidence]
    captures: list[Capture]


def _row(check_id: str, verdict: str, blocking: bool, detail: str) -> Evidence:
    return {"id": check_id, "verdict": verdict, "blocking": blocking, "detail": detail}


def _times(rank: Rank) -> tuple[dict[str, int], int]:
    names = rank["names"]
    by = {k["name"]: int(k["ns"]) for k in names["kernels"]}
    return by, sum(by.values()) + int(names.get("other_ns") or 0)


def _share(a: dict[str, int], total: int, other: dict[str, int]) -> float | None:
    return sum(ns for n, ns in a.items() if n in other) / total if total else None


def names(ranks: list[Rank], label: list[str]) -> Evidence:
    ref, ref_total = _times(ranks[0])
    worst: tuple[float, int, float, float] | None = None
    for i in range(1, len(ranks)):
        mine, total = _times(ranks[i])
        a, b = _share(mine, total, ref), _share(ref, ref_total, mine)
        if a is None or b is None:
            continue
        if worst is None or min(a, b) < worst[0]:
            worst = (min(a, b), i, a, b)
    if worst is None:
        return _row("kernel_names", "unknown", False, "a rank ran no kernel")
    low, i, a, b = worst
    text = (f"{label[i]} and {label[0]} share kernel names holding {fmt.pct(100 * a)} and {fmt.pct(100 * b)} of "
            "their kernel time")
    if low < MIN_NAME_SHARE:
        return _row("kernel_names", "differs", True, f"captures of different programs: {text}")
    if low < NAME_CAUTION:
        return _row("kernel_names", "differs", False, f"kernel names differ between ranks: {text}")
    return _row("kernel_names", "same", False, f"the ranks run the same kernels (least shared: {text})")


def _counts(rank: Rank) -> dict[str, int]:
    c = rank["collectives"]
    out: dict[str, int] = {}
    for code in c["kind"].tolist():
        kind = c["kinds"][code]
        out[kind] = out.get(kind, 0) + 1
    return out


def collectives(ranks: list[Rank], label: list[str]) -> Evidence:
    counts = [_counts(r) for r in ranks]
    some = [i for i, c in enumerate(counts) if c]
    if not some:
        return _row("collectives", "unknown", False, "no rank ran a communication kernel")
    none = [i for i, c in enumerate(counts) if not c]
    sizes = "; message sizes are not in kernel records, so not checked"
    if none:
        shown = ", ".join(label[i] for i in none[:3]) + (f" and {len(none) - 3} more" if len(none) > 3 else "")
        first = some[0]
        return _row("collectives", "differs", True,
                    f"captures of different programs: {shown} ran no collective, while {label[first]} ran "
                    f"{sum(counts[first].values()):,}{sizes}")
    kinds = sorted(set().union(*counts))
    worst: tuple[float, str, int, int] | None = None
    for kind in kinds:
        per = [c.get(kind, 0) for c in counts]
        lo, hi = min(per), max(per)
        ratio = hi / lo if lo else float("inf")
        if worst is None or ratio > worst[0]:
            worst = (ratio, kind, lo, hi)
    assert worst is not None
    ratio, kind, lo, hi = worst
    spread = f"{kind}: {lo:,} to {hi:,} per rank"
    if ratio > COUNT_RATIO:
        return _row("collectives", "differs", True,
                    f"collective counts differ more than {COUNT_RATIO:g}x ({spread}): not the same steps of one "
                    f"program{sizes}")
    if ratio > COUNT_CAUTION:
        return _row("collectives", "differs", False, f"collective counts differ ({spread}){sizes}")
    total = sum(counts[0].values())
    return _row("collectives", "same", False,
                f"every rank ran the same collectives ({', '.join(kinds)}; {total:,} on {label[0]}){sizes}")


def world(ranks: list[Rank]) -> Evidence:
    sizes = {w["world_size"] if w else None for w in (r.get("world") for r in ranks)}
    if None in sizes or len(sizes) != 1:
        return _row("world_size", "unknown", False,
                    "not every trace records its world size" if None in sizes else "the traces record "
                    "different world sizes")
    size = int(next(iter(sizes)) or 0)
    if len(ranks) > size:
        return _row("world_size", "differs", True,
                    f"{len(ranks)} ranks, but the traces record a world size of {size}: not the ranks of one job")
    if len(ranks) < size:
        return _row("world_size", "differs", False, f"{len(ranks)} of the job's {size} ranks were given")
    return _row("world_size", "same", False, f"all {size} ranks of the job")


def program_evidence(ranks: list[Rank], label: list[str]) -> list[Evidence]:
    """The evidence rows for a run of several traces (label: each rank's name)."""
    if len({r["trace_index"] for r in ranks}) < 2:
        return []
    return [names(ranks, label), collectives(ranks, label), world(ranks)]


CLOCK_SLACK_NS = 100_000_000  # 0.1 s: far beyond NTP-synchronized host clocks


def utc(ns: int) -> str:
    t = dt.datetime.fromtimestamp(ns / 1e9, tz=dt.UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def span_words(ns: int) -> str:
    """A long duration in words (minutes, hours, days), a short one as a duration."""
    s = abs(ns) / 1e9
    if s >= 2 * 86_400:
        return f"{s / 86_400:.1f} days"
    if s >= 2 * 3_600:
        return f"{s / 3_600:.1f} hours"
    if s >= 120:
        return f"{s / 60:.0f} minutes"
    return fmt.dur(abs(ns))


def captures(ranks: list[Rank], paths: dict[int, str]) -> list[Capture]:
    """One entry per trace of the run: its path, clock origin and wall-clock window."""
    by_trace: dict[int, list[Rank]] = {}
    for r in ranks:
        by_trace.setdefault(r["trace_index"], []).append(r)
    out: list[Capture] = []
    for ti, members in sorted(by_trace.items()):
        origin = members[0]["clock"]["origin_ns"]
        start = min(r["window_start_ns"] for r in members)
        end = max(r["window_start_ns"] + r["window_ns"] for r in members)
        world = members[0].get("world")
        out.append({
            "trace_index": ti,
            "path": paths.get(ti, str(ti)),
            "ranks": len(members),
            "origin_ns": origin,
            "origin_source": members[0]["clock"]["source"],
            "wall_start_ns": origin + start if origin is not None else None,
            "wall_end_ns": origin + end if origin is not None else None,
            "world_size": world["world_size"] if world else None,
            "rank": world["rank"] if world else None,
            "gpus": sorted({g for r in members for g in r.get("gpus") or []}),
        })
    return out


def check(ranks: list[Rank], paths: dict[int, str], force: bool = False,
          names: list[str] | None = None) -> Comparability:
    """fleet.json run `comparability` (names: each rank's name, for the evidence's words)."""
    caps = captures(ranks, paths)
    reasons: list[str] = []
    cautions: list[str] = []
    overlap: int | None = None
    timed = [(c["path"], s, e) for c in caps
             if (s := c["wall_start_ns"]) is not None and (e := c["wall_end_ns"]) is not None]
    if len(caps) > 1 and len(timed) == len(caps):
        first_end = min(timed, key=lambda t: t[2])
        last_start = max(timed, key=lambda t: t[1])
        overlap = first_end[2] - last_start[1]
        if overlap < -CLOCK_SLACK_NS:
            reasons.append(
                f"the captures never overlapped in time: {first_end[0]} ran "
                f"{utc(first_end[1])} to {utc(first_end[2])}, "
                f"{last_start[0]} began {utc(last_start[1])}, {span_words(-overlap)} after it ended "
                "(clock origins: each capture's recorded start time)")
    elif len(caps) > 1:
        missing = [c["path"] for c in caps if c["wall_start_ns"] is None]
        cautions.append(f"whether the captures overlap in time cannot be checked: {', '.join(missing[:3])} "
                        f"record{'s' if len(missing) == 1 else ''} no clock origin")
    worlds = {c["world_size"] for c in caps if c["world_size"] is not None}
    if len(worlds) > 1:
        shown = ", ".join(f"{c['path']}: " + (f"rank {c['rank']} of {c['world_size']}" if c["rank"] is not None
                          else f"world size {c['world_size']}") for c in caps if c["world_size"] is not None)
        reasons.append(f"the traces come from different jobs (world sizes {' vs '.join(map(str, sorted(worlds)))}; "
                       f"{shown})")
    seen: dict[tuple[int, int], str] = {}
    for c in caps:
        if c["rank"] is None or c["world_size"] is None:
            continue
        key = (c["rank"], c["world_size"])
        if key in seen:
            reasons.append(f"{seen[key]} and {c['path']} both record rank {c['rank']} of {c['world_size']}: "
                           "two captures of one rank, not two ranks of one run")
        else:
            seen[key] = c["path"]
    models = sorted({g for c in caps for g in c["gpus"] if g != "unknown model"})
    if len(models) > 1:
        cautions.append(f"the ranks ran on different GPU models ({', '.join(models)})")
    rows = program_evidence(ranks, names or [f"rank {i}" for i in range(len(ranks))])
    reasons += [r["detail"] for r in rows if r["blocking"]]
    cautions += [r["detail"] for r in rows if r["verdict"] == "differs" and not r["blocking"]]
    refused = bool(reasons) and not force
    return {
        "comparable": not reasons,
        "refused": refused,
        "forced": bool(reasons) and force,
        "reasons": reasons,
        "cautions": cautions,
        "overlap_ns": overlap,
        "evidence": rows,
        "captures": caps,
    }


def refused_clock(comp: Comparability, ranks: list[Rank]) -> ClockDoc:
    """The clock section of a refused run: each capture on its own clock, nothing aligned."""
    return {
        "method": "refused",
        "refined_by_collectives": False,
        "trust_level": "none",
        "trust": "none: not aligned (" + "; ".join(dict.fromkeys(r.split(":", 1)[0] for r in comp["reasons"])) + ")",
        "zero_ns": 0,
        "domains": [
            {"trace_index": c["trace_index"], "ranks": c["ranks"], "origin_source": c["origin_source"],
             "origin_ns": c["origin_ns"], "offset_ns": 0, "correction_ns": None, "residual_mad_ns": None,
             "matched": 0}
            for c in comp["captures"]
        ],
    }


FORCED_TRUST = "low (forced with --force-align): "


def implausible_waits(coll: CollectivesDoc, ranks: list[Rank]) -> list[str]:
    """Collective waits that cannot be true: a rank waiting longer than its own capture, or the
    wait one rank causes exceeding the others' captured time."""
    out = []
    windows = [r["window_ns"] for r in ranks]
    for pr in coll.get("ranks", []):
        r = pr["rank"]
        if pr["wait_suffered_ns"] > windows[r]:
            out.append(f"rank {r} would wait {span_words(pr['wait_suffered_ns'])} in collectives in a capture of "
                       f"{fmt.dur(windows[r])}")
        others = sum(w for i, w in enumerate(windows) if i != r)
        if pr["wait_caused_ns"] > others:
            out.append(f"rank {r} would make the others wait {span_words(pr['wait_caused_ns'])}, more than their "
                       f"{fmt.dur(others)} of captured time")
    return out
