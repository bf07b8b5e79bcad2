"""fleet.md: the verdict first (which rank makes the others wait, and what it costs), the traces
that failed or were skipped, then a small rank table; everything else in <details> blocks."""

from __future__ import annotations

from collections.abc import Callable

from nsys_llm_explainer import fmt
from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.fleet.align import CollectivesDoc
from nsys_llm_explainer.fleet.runs import FleetDoc, RankRow, RunDoc, SweepFit
from nsys_llm_explainer.fleet.same_run import span_words, utc
from nsys_llm_explainer.render.escape import md, md_name
from nsys_llm_explainer.render.escape import md as _md

HEADING = f"# {TOOL_NAME} fleet"
TABLE_ROWS = 16  # ranks in the first table; all of them in tables/ranks.csv and the details
FIRST_FAILED = 3  # failed traces named on the first screen; all of them further down


def _plain(text: object) -> str:
    return str(text)


def _run_verdict(run: RunDoc, plain: bool = False) -> str:
    md = _plain if plain else _md  # plain text for the HTML page and stdout
    comp = run.get("comparability") or {}
    if comp.get("refused"):
        return (f"**Not aligned, not compared**: {md('; '.join(comp['reasons']))}. The ranks are listed on "
                "their own clocks; no rank is named (--force-align compares them anyway). Clock trust: none.")
    prefix = f"Clock trust: {run['clock'].get('trust_level') or 'unknown'}. "
    if comp.get("forced"):
        prefix += f"**Forced alignment (--force-align), low trust**: {md('; '.join(comp['reasons']))}. "
    return prefix + _aligned_verdict(run, md)


def _aligned_verdict(run: RunDoc, md: Callable[[object], str]) -> str:
    h = run["headline"]
    coll = run["collectives"]
    who = f"rank {h['rank']} ({md(h['name'])})" if h["rank"] is not None else None
    if run["clock"].get("trust_level") == "low":
        text = (f"**No rank is named**: the clocks are low trust ({md(run['clock']['trust'])}), so neither who "
                "arrives last nor who lags behind is known.")
        caution = "; ".join((run.get("comparability") or {}).get("cautions") or [])
        return text + (f" Caution: {md(caution)}." if caution else "")
    if coll.get("status") == "error":
        text = f"**No rank is blamed for collective wait**: {md(coll['reason'])}."
    elif h["wait_caused_ns"]:
        b = coll["blame"]
        assert b is not None, "a rank that caused wait was judged"
        text = (f"**{who} makes the others wait**: it arrives last at {fmt.pct(h['arrived_last_pct'])} of "
                f"{coll['charged']:,} matched collectives that were not a tie (chance {fmt.pct(b['chance_pct'])}, "
                f"binomial p = {b['p_value']:.2g}); the other ranks wait "
                f"{fmt.dur(h['wait_caused_ns'])} for it in total ({fmt.pct(h['wait_pct_of_others_gpu_time'])} "
                f"of their kernel time, {fmt.pct(h['share_of_wait_pct'])} of all collective wait).")
    elif coll.get("status") == "ok" and coll.get("blame"):
        text = _no_culprit(coll, run["ranks"], md)
    elif h["rank"] is not None:
        text = (f"**{who} is a straggler**; no collective wait was measured "
                f"({coll.get('reason', 'no rank arrived last beyond the tie threshold')}).")
    else:
        if coll.get("status") != "ok":
            # Nothing was matched (one rank, no collectives): who waits for whom is not measured,
            # which is not the same as no one waiting.
            text = f"**Which rank makes the others wait: not measured** ({coll.get('reason')})."
        else:
            text = "**No rank makes the others wait** (no rank arrives last beyond the tie threshold)."
    strag = run["stragglers"]
    if strag.get("status") == "ok" and strag["stragglers"]:
        parts = []
        for s in strag["stragglers"]:
            why = "; ".join(f"{w['title']} {fmt.pct(w['excess_pct'])} above the median" for w in s["why"])
            parts.append(f"rank {s['rank']} ({why})")
        text += " Straggler" + ("s" if len(parts) > 1 else "") + ": " + ", ".join(parts) + "."
    elif strag.get("status") == "ok":
        text += (f" No straggler beyond the robust band (median + {strag['k']:g} x {strag['mad_scale']} "
                 "x MAD).")
    else:
        text += f" Stragglers: not measured, because {strag['reason']}."
    return text


def _no_culprit(coll: CollectivesDoc, rows: list[RankRow], md: Callable[[object], str]) -> str:
    """The collective wait is spread over the ranks: the rank with the most, and the test it fails."""
    b = coll["blame"]
    assert b is not None, "called with the blame"
    r = b["rank"]
    share = 100.0 * b["arrived_last"] / b["charged"] if b["charged"] else None
    why = []
    if b["p_value"] > b["rank_level"]:
        why.append(f"binomial p = {b['p_value']:.2g} against chance, where naming a rank needs "
                   f"p <= {b['rank_level']:.2g}")
    if b["wait_band_ns"] is not None and b["wait_caused_ns"] <= b["wait_band_ns"]:
        why.append(f"its wait caused, {fmt.dur(b['wait_caused_ns'])}, is within the ranks' robust band "
                   f"({fmt.dur(b['wait_band_ns'])})")
    return (f"**No rank stands out as making the others wait**: rank {r} ({md(rows[r]['name'])}) causes the "
            f"most collective wait and arrives last at {fmt.pct(share)} of {b['charged']:,} matched collectives "
            f"that were not a tie (chance {fmt.pct(b['chance_pct'])}), but {' and '.join(why)}; the "
            f"{fmt.dur(coll['total_wait_ns'])} of collective wait is spread over the ranks.")


def verdict(doc: FleetDoc, plain: bool = False) -> str:
    """The verdict line: Markdown, or plain text (HTML page, stdout) with plain=True."""
    runs = doc["runs"]
    if not runs:
        return "No trace could be analyzed."
    if len(runs) == 1:
        text = _run_verdict(runs[0], plain)
    else:
        sweep = doc["sweep"]
        check = sweep["check"] if sweep else None
        how = (check["text"] if plain else md(check["text"])) if check else "compared as runs"
        text = f"Sweep of {len(runs)} runs, {how}; per run: " + " ".join(
            f"[{r['label'] if plain else md(r['label'])}] {_run_verdict(r, plain)}" for r in runs)
    return text.replace("**", "") if plain else text


def _rank_table(rows: list[RankRow], limit: int | None) -> list[str]:
    out = ["| rank | name | step p50 | compute | compute/step | GPU busy | exposed comm | arrived last | "
           "wait caused | verdict |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    shown = rows
    if limit is not None and len(rows) > limit:
        flagged = [r for r in rows if r["straggler"] or r["wait_caused_ns"]]
        flagged = sorted(flagged, key=lambda r: -(r["wait_caused_ns"] or 0))[: limit // 2]
        keep = {r["rank"] for r in flagged} | {r["rank"] for r in rows[: limit - len(flagged)]}
        shown = [r for r in rows if r["rank"] in keep]
    for r in shown:
        mark = " **straggler**" if r["straggler"] else ""
        out.append(
            f"| {r['rank']} | {md_name(r['name'], 40)}{mark} | {fmt.dur(r['step_p50_ns'])} | "
            f"{fmt.dur(r['compute_ns'])} | {fmt.dur(r['compute_per_step_ns'])} | "
            f"{fmt.pct(r['gpu_busy_pct'])} | {fmt.dur(r['exposed_comm_ns'])} | {fmt.num(r['arrived_last'])} | "
            f"{fmt.dur(r['wait_caused_ns'])} | {md(r['verdict'])} |")
    if len(shown) < len(rows):
        out.append(f"\n{len(rows) - len(shown)} more ranks in tables/ranks.csv and below.")
    return out


def _details(summary: str, body: list[str]) -> list[str]:
    return ["", f"<details><summary>{summary}</summary>", "", *body, "", "</details>"]


def _stragglers(run: RunDoc) -> list[str]:
    s = run["stragglers"]
    if s["status"] != "ok":
        return [f"Not measured, because {md(s['reason'])}."]
    out = [f"Band: median + {s['k']:g} x {s['mad_scale']} x MAD, and at least {s['min_excess_pct']:g}% above "
           "the median (MAD x 1.4826 estimates the standard deviation; 3 of them: about 1 false flag in 740 ranks).",
           "", "| signal | median | MAD | band |", "|---|---:|---:|---:|"]
    for g in s["signals"]:
        out.append(f"| {g['title']} | {fmt.dur(g['median'])} | {fmt.dur(g['mad'])} | {fmt.dur(g['upper'])} |")
    for st in s["stragglers"]:
        out += ["", f"**Rank {st['rank']}** ({md_name(st['name'], 60)}):"]
        for w in st["why"]:
            out.append(f"- {w['title']}: {fmt.dur(w['value'])} vs median {fmt.dur(w['median'])} "
                       f"(+{fmt.pct(w['excess_pct'])})")
        for kern in st["kernels"]:
            out.append(f"- more time in `{md_name(kern['name'], 70)}`: {fmt.dur(kern['ns'])} vs median "
                       f"{fmt.dur(kern['median_ns'])} (+{fmt.dur(kern['extra_ns'])})")
        if st["host_idle_ns"] is not None:
            out.append(f"- host-side idle (launch_bound + host_other): {fmt.dur(st['host_idle_ns'])} vs median "
                       f"{fmt.dur(st['host_idle_median_ns'])}")
        if st["copy_ns"] is not None:
            out.append(f"- copies: {fmt.dur(st['copy_ns'])} vs median {fmt.dur(st['copy_median_ns'])}")
    if not s["stragglers"]:
        out += ["", "No rank lies beyond the band."]
    return out


def _collectives(run: RunDoc) -> list[str]:
    c = run["collectives"]
    if c["status"] != "ok":
        return [f"Not measured, because {md(c['reason'])}."]
    out = [f"{c['matched']:,} matched collectives ({c['charged']:,} with an arrival skew of at least "
           f"{fmt.dur(c['tie_ns'])}); total wait {fmt.dur(c['total_wait_ns'])}.", "",
           "| kind | stream | matched | skew p50 | skew p99 | skew max | wait | transfer p50 | slow |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for k in c["kinds"]:
        out.append(f"| {md(k['kind'])} | {k['stream_ordinal']} | {k['matched']:,} | {fmt.dur(k['skew_p50_ns'])} | "
                   f"{fmt.dur(k['skew_p99_ns'])} | {fmt.dur(k['skew_max_ns'])} | {fmt.dur(k['wait_ns'])} | "
                   f"{fmt.dur(k['transfer_p50_ns'])} | {k['slow']} |")
    top = sorted(c["ranks"], key=lambda r: (-r["wait_caused_ns"], r["rank"]))[:8]
    out += ["", "| rank | arrived last | wait caused | wait suffered |", "|---:|---:|---:|---:|"]
    for r in top:
        out.append(f"| {r['rank']} | {r['arrived_last']:,} ({fmt.pct(r['arrived_last_pct'])}) | "
                   f"{fmt.dur(r['wait_caused_ns'])} | {fmt.dur(r['wait_suffered_ns'])} |")
    if c["slow"]:
        out += ["", f"Slow collectives ({c['slow_count']}; transfer = median end - last arrival):", "",
                "| kind | stream | index | transfer | x median |", "|---|---:|---:|---:|---:|"]
        for s in c["slow"]:
            out.append(f"| {md(s['kind'])} | {s['stream_ordinal']} | {s['index']} | {fmt.dur(s['transfer_ns'])} | "
                       f"{s['ratio_to_median']:.2f} |")
    return out


def overlap_text(run: RunDoc) -> str | None:
    """Whether the captures ran at the same time, in words (None for a single capture)."""
    comp = run.get("comparability") or {}
    caps = comp.get("captures") or []
    if len(caps) < 2:
        return None
    overlap = comp.get("overlap_ns")
    if overlap is None:
        return "Whether the captures overlap in time is unknown: not every capture records its start time."
    if overlap >= 0:
        return f"The captures overlap in time for {fmt.dur(overlap)} (on their recorded start times)."
    return (f"The captures do not overlap in time: the latest starts {span_words(-overlap)} after the "
            "earliest ends (on their recorded start times).")


def _captures(run: RunDoc) -> list[str]:
    comp = run.get("comparability") or {}
    caps = comp.get("captures") or []
    if not caps:
        return []

    out = ["", "| trace | ranks | starts (wall clock) | ends | rank in job | GPUs |", "|---|---:|---|---|---|---|"]
    for c in caps:
        start = utc(c["wall_start_ns"]) if c["wall_start_ns"] is not None else "unknown"
        end = utc(c["wall_end_ns"]) if c["wall_end_ns"] is not None else "unknown"
        job = (f"{c['rank']} of {c['world_size']}" if c["rank"] is not None else f"of {c['world_size']}") \
            if c["world_size"] is not None else "not recorded"
        gpus = md(", ".join(c["gpus"]) or "unknown")
        out.append(f"| {md(c['path'])} | {c['ranks']} | {start} | {end} | {job} | {gpus} |")
    text = overlap_text(run)
    if text:
        out += ["", text]
    rows = comp.get("evidence") or []
    if rows:
        out += ["", "One program (from the traces' contents):", ""]
        out += [f"- {r['id'].replace('_', ' ')}: {r['verdict']}{' (blocking)' if r['blocking'] else ''}: "
                f"{md(r['detail'])}" for r in rows]
    for line in comp.get("cautions") or []:
        out += ["", f"Caution: {md(line)}."]
    return out


def _clock(run: RunDoc) -> list[str]:
    c = run["clock"]
    out = [f"Method: {c['method']}" + (", refined by collective end times" if c["refined_by_collectives"] else "")
           + f". Trust: {md(c['trust'])}.", *_captures(run), "",
           "| trace | ranks | origin | offset | correction | residual (MAD) | matched |",
           "|---:|---:|---|---:|---:|---:|---:|"]
    for d in c["domains"]:
        out.append(f"| {d['trace_index']} | {d['ranks']} | {md(d['origin_source'] or 'none')} | "
                   f"{fmt.dur(d['offset_ns'])} | {fmt.dur(d['correction_ns'])} | {fmt.dur(d['residual_mad_ns'])} | "
                   f"{d['matched']:,} |")
    return out


def _imbalance(run: RunDoc) -> list[str]:
    imb = run["imbalance"]
    if imb["status"] != "ok":
        return [f"Not measured, because {md(imb['reason'])}."]
    out = [f"Compute time max/mean over ranks: {imb['compute_max_over_mean']} (rank {imb['compute_max_rank']})."]
    ps = imb["per_step"]
    if ps["status"] == "ok":
        out.append(f"Per step ({ps['steps']:,} steps): max/mean p50 {ps['max_over_mean_p50']}, p90 "
                   f"{ps['max_over_mean_p90']}, max {ps['max_over_mean_max']}; rank {ps['most_often_max_rank']} "
                   f"has the most compute in {fmt.pct(ps['most_often_max_pct'])} of steps.")
    else:
        out.append(f"Per step: not measured, because {md(ps['reason'])}.")
    if imb["kernel_mix"]:
        out += ["", "| kernel | min share (rank) | max share (rank) | spread |", "|---|---:|---:|---:|"]
        for k in imb["kernel_mix"]:
            out.append(f"| `{md_name(k['name'], 70)}` | {fmt.pct(k['min_share_pct'])} ({k['min_rank']}) | "
                       f"{fmt.pct(k['max_share_pct'])} ({k['max_rank']}) | {k['spread_pp']:.1f} pp |")
    return out


def _run_section(run: RunDoc, multi: bool) -> list[str]:
    out = []
    if multi:
        out += ["", f"## Run {md(run['label'])}", "", _run_verdict(run)]
    out += ["", *_rank_table(run["ranks"], TABLE_ROWS)]
    out += _details("Stragglers", _stragglers(run))
    out += _details("Collective alignment and wait", _collectives(run))
    out += _details("Imbalance and kernel mix", _imbalance(run))
    out += _details("Clock alignment and captures", _clock(run))
    if len(run["ranks"]) > TABLE_ROWS:
        out += _details("All ranks", _rank_table(run["ranks"], None))
    return out


def input_notes(doc: FleetDoc, plain: bool = False) -> list[str]:
    """First-screen lines on traces that failed (count, the first few with their error) and
    JSON files skipped as not traces, and repeats of a trace counted once."""
    m = _plain if plain else md
    out = []
    failed = [t for t in doc["traces"] if not t["ok"]]
    if failed:
        shown = "; ".join(f"{m(t['path'])}: {m(t['error'] or 'unknown error')}" for t in failed[:FIRST_FAILED])
        more = f"; {len(failed) - FIRST_FAILED} more" if len(failed) > FIRST_FAILED else ""
        head = f"{len(failed)} of {len(doc['traces'])} traces could not be analyzed"
        out.append(f"{head if plain else f'**{head}**'}: {shown}{more} (all in tables/traces.csv).")
    skipped = doc["inputs"].get("skipped") or []
    if skipped:
        names = ", ".join(m(p) for p in skipped[:FIRST_FAILED])
        more = f" and {len(skipped) - FIRST_FAILED} more" if len(skipped) > FIRST_FAILED else ""
        out.append(f"Skipped {len(skipped)} JSON file(s) that are not traces (no traceEvents): {names}{more}.")
    repeats = doc["inputs"].get("duplicates") or []
    if repeats:
        names = "; ".join(f"{m(d['path'])} ({d['how']} as {m(d['same_as'])})" for d in repeats[:FIRST_FAILED])
        more = f"; {len(repeats) - FIRST_FAILED} more" if len(repeats) > FIRST_FAILED else ""
        out.append(f"Counted once: {len(repeats)} path(s) repeat a trace already taken, not analyzed again: "
                   f"{names}{more}.")
    return out


def _fit_text(fit: SweepFit) -> str:
    head = f"{fit['phase']} ({fit['iterations']:,} iterations of {fit['runs']} run{'s' * (fit['runs'] != 1)})"
    if not fit["terms"]:
        return f"{head}: no fit, {md(fit['reason'])}"
    terms = ", ".join(f"{name.removesuffix('_ns').replace('_', ' ')} {value:,.1f} ns"
                      for name, value in fit["terms"].items())
    return f"{head}: {terms} (RMS error {fmt.dur(fit['rmse_ns'])}, at most {fmt.pct(fit['max_error_pct'])})"


def markdown(doc: FleetDoc, plots: list[tuple[str, str]]) -> str:
    out = [HEADING, "", verdict(doc)]
    for line in input_notes(doc):
        out += ["", line]
    if doc["sweep"] is not None:
        out += ["", "## Sweep", "",
                "| label | ranks | step p50 | steps/s | GPU busy | compute/step | wait caused | verdict |",
                "|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in doc["sweep"]["rows"]:
            out.append(f"| {md(r['label'])} | {r['ranks']} | {fmt.dur(r['step_p50_ns'])} | "
                       f"{fmt.num(r['steps_per_s'])} | {fmt.pct(r['gpu_busy_pct'])} | "
                       f"{fmt.dur(r['compute_per_step_ns'])} | "
                       f"{fmt.dur(r['wait_caused_ns'])} | {md(r['verdict'])} |")
        for title, path in plots:
            out += ["", f"![{md(title)}]({path})"]
        fits = doc["sweep"].get("fits") or []
        if fits:
            out += ["", "Serving latency model across the runs (GPU span per iteration): " + "; ".join(
                _fit_text(f) for f in fits) + "."]
    for run in doc["runs"]:
        out += _run_section(run, len(doc["runs"]) > 1)
    failed = [t for t in doc["traces"] if not t["ok"]]
    if failed:
        out += _details(f"{len(failed)} trace(s) could not be analyzed",
                        [f"- {md(t['path'])}: {md(t['error'])}" for t in failed])
    i = doc["inputs"]
    out += ["", f"{i['traces']} traces ({i['failed']} failed), {i['ranks']} ranks, {i['runs']} run(s). "
            "Full tables: tables/ranks.csv, tables/collectives.csv, tables/kernel_mix.csv; "
            "machine-readable: fleet.json."]
    return "\n".join(out) + "\n"
