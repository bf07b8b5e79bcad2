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
- Program: the traces' contents say whether the ranks run one program (evidence.py: kernel
  names in common, the same collectives in the same numbers, the world size); captures of
  different programs are refused like captures that never overlapped. This is the only
  check of a set whose captures record no clock origin.

A run that fails a check is refused: its ranks are listed but not aligned or compared, unless
the user forces it (--force-align). A forced alignment has low trust whatever the clocks say.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from nsys_llm_explainer import fmt
from nsys_llm_explainer.fleet import evidence

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


def captures(ranks: list[dict[str, Any]], paths: dict[int, str]) -> list[dict[str, Any]]:
    """One entry per trace of the run: its path, clock origin and wall-clock window."""
    by_trace: dict[int, list[dict[str, Any]]] = {}
    for r in ranks:
        by_trace.setdefault(r["trace_index"], []).append(r)
    out = []
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
            "world_size": (world or {}).get("world_size"),
            "rank": (world or {}).get("rank"),
            "gpus": sorted({g for r in members for g in r.get("gpus") or []}),
        })
    return out


def check(ranks: list[dict[str, Any]], paths: dict[int, str], force: bool = False,
          names: list[str] | None = None) -> dict[str, Any]:
    """fleet.json run `comparability` (names: each rank's name, for the evidence's words)."""
    caps = captures(ranks, paths)
    reasons: list[str] = []
    cautions: list[str] = []
    overlap: int | None = None
    timed = [c for c in caps if c["wall_start_ns"] is not None]
    if len(caps) > 1 and len(timed) == len(caps):
        first_end = min(caps, key=lambda c: c["wall_end_ns"])
        last_start = max(caps, key=lambda c: c["wall_start_ns"])
        overlap = first_end["wall_end_ns"] - last_start["wall_start_ns"]
        if overlap < -CLOCK_SLACK_NS:
            reasons.append(
                f"the captures never overlapped in time: {first_end['path']} ran "
                f"{utc(first_end['wall_start_ns'])} to {utc(first_end['wall_end_ns'])}, "
                f"{last_start['path']} began {utc(last_start['wall_start_ns'])}, {span_words(-overlap)} after it ended "
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
    rows = evidence.check(ranks, names or [f"rank {i}" for i in range(len(ranks))])
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


def refused_clock(comp: dict[str, Any], ranks: list[dict[str, Any]]) -> dict[str, Any]:
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


def implausible_waits(coll: dict[str, Any], ranks: list[dict[str, Any]]) -> list[str]:
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
