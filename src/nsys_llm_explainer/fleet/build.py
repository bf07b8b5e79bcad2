"""From per-trace summaries to the fleet result: runs, their ranks and analyses, the sweep.

The result (fleet.json and every other output) depends only on the inputs and options,
never on where or how fast the traces were analyzed: run facts (worker, seconds, cache
hits) go to `timing`, which is written to fleet_timing.json on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from nsys_llm_explainer.about import TOOL_NAME, __version__
from nsys_llm_explainer.fleet import robust, runs, sweep
from nsys_llm_explainer.fleet.inputs import TraceInput

SCHEMA_VERSION = "1.1"


@dataclass
class FleetResult:
    doc: dict[str, Any]
    runs: list[runs.Run]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)


def build(inputs: list[TraceInput], results: list[dict[str, Any]], options: dict[str, Any],
          k: float = robust.K, skipped: list[str] | None = None, force_align: bool = False,
          duplicates: list[dict[str, str]] | None = None) -> FleetResult:
    by_label: dict[str, list[int]] = {}
    for i, t in enumerate(inputs):
        by_label.setdefault(t.label, []).append(i)
    labels = list(by_label)
    built: list[runs.Run] = []
    sweep_rows = []
    sweep_members: list[tuple[str, list[dict[str, Any]]]] = []
    for li in sweep.order(labels):
        label = labels[li]
        members = [(i, inputs[i].path, s) for i in by_label[label] if results[i]["ok"]
                   for s in results[i]["ranks"]]
        if not members:
            continue
        run = runs.build(label, inputs[by_label[label][0]].labels, members, k, force_align)
        built.append(run)
        sweep_rows.append(sweep.row(run.doc, [m[2] for m in members]))
        sweep_members.append((label, [m[2] for m in members]))
    traces = [
        {"path": t.path, "label": t.label, "format": r.get("format"), "ok": bool(r["ok"]),
         "error": r["error"], "ranks": len(r["ranks"]), "warnings": int(r.get("warnings", 0))}
        for t, r in zip(inputs, results, strict=True)
    ]
    tables: dict[str, pd.DataFrame] = {}
    tables["ranks"] = pd.concat(
        [pd.DataFrame(r.doc["ranks"], columns=list(runs.RANK_COLUMNS)).assign(run=r.label) for r in built]
        or [pd.DataFrame(columns=[*runs.RANK_COLUMNS, "run"])],
        ignore_index=True,
    ).loc[:, ["run", *runs.RANK_COLUMNS]]
    for name in ("collectives", "kernel_mix"):
        parts = [r.tables[name].assign(run=r.label) for r in built if name in r.tables]
        if parts:
            frame = pd.concat(parts, ignore_index=True)
            tables[name] = frame.loc[:, ["run", *[c for c in frame.columns if c != "run"]]]
    tables["traces"] = pd.DataFrame(traces, columns=["path", "label", "format", "ok", "error", "ranks", "warnings"])
    if len(built) > 1:
        tables["sweep"] = sweep.table(sweep_rows)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "options": {**options, "straggler_k": k, "mad_scale": robust.MAD_SCALE,
                    "min_excess_pct": robust.MIN_EXCESS_PCT, "force_align": force_align},
        "inputs": {"traces": len(inputs), "ok": sum(t["ok"] for t in traces),
                   "failed": sum(not t["ok"] for t in traces),
                   "ranks": sum(len(r.doc["ranks"]) for r in built), "runs": len(built),
                   "skipped": list(skipped or []), "duplicates": [dict(d) for d in duplicates or []]},
        "traces": traces,
        "runs": [r.doc for r in built],
        "sweep": {"rows": sweep_rows, "numeric_labels": sweep.numeric([r["label"] for r in sweep_rows]) is not None,
                  "check": sweep.check(sweep_members), "fits": sweep.fits(sweep_members)}
        if len(built) > 1 else None,
    }
    doc["verdict"] = verdict_line(doc)
    return FleetResult(doc, built, tables)


def verdict_line(doc: dict[str, Any]) -> str:
    from nsys_llm_explainer.fleet.render_text import verdict

    return verdict(doc)
