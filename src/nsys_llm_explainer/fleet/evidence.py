"""Whether the traces of a run are captures of one program: the evidence in their contents.

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
run's comparability `evidence`; a blocking one is also among its `reasons`.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer import fmt

MIN_NAME_SHARE = 0.5
NAME_CAUTION = 0.9
COUNT_RATIO = 2.0
COUNT_CAUTION = 1.1


def _row(check_id: str, verdict: str, blocking: bool, detail: str) -> dict[str, Any]:
    return {"id": check_id, "verdict": verdict, "blocking": blocking, "detail": detail}


def _times(rank: dict[str, Any]) -> tuple[dict[str, int], int]:
    names = rank["names"]
    by = {k["name"]: int(k["ns"]) for k in names["kernels"]}
    return by, sum(by.values()) + int(names.get("other_ns") or 0)


def _share(a: dict[str, int], total: int, other: dict[str, int]) -> float | None:
    return sum(ns for n, ns in a.items() if n in other) / total if total else None


def names(ranks: list[dict[str, Any]], label: list[str]) -> dict[str, Any]:
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


def _counts(rank: dict[str, Any]) -> dict[str, int]:
    c = rank["collectives"]
    out: dict[str, int] = {}
    for code in c["kind"].tolist():
        kind = c["kinds"][code]
        out[kind] = out.get(kind, 0) + 1
    return out


def collectives(ranks: list[dict[str, Any]], label: list[str]) -> dict[str, Any]:
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


def world(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    sizes = {(r.get("world") or {}).get("world_size") for r in ranks}
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


def check(ranks: list[dict[str, Any]], label: list[str]) -> list[dict[str, Any]]:
    """The evidence rows for a run of several traces (label: each rank's name)."""
    if len({r["trace_index"] for r in ranks}) < 2:
        return []
    return [names(ranks, label), collectives(ranks, label), world(ranks)]
