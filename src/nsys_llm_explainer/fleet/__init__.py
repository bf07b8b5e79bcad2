"""fleet: many traces at once. Ranks of one job (one trace per rank, or one trace holding
several processes) compared with each other, and runs of a sweep compared by label.

Each trace is analyzed on its own (api.explain, cached), in local worker processes or on a
Dask cluster; only compact per-rank summaries come back (worker.py), and the cross-rank
analyses run here on those.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from nsys_llm_explainer.fleet import execute, robust
from nsys_llm_explainer.fleet.build import FleetResult, build
from nsys_llm_explainer.fleet.inputs import TraceInput
from nsys_llm_explainer.fleet.worker import Task, options_key
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render.templates import NO_CACHE_ENV
from nsys_llm_explainer.runtime.machine import usable_cpus

Progress = Callable[[int, int, TraceInput, dict[str, Any]], None]


def run(
    inputs: list[TraceInput],
    options: Options | None = None,
    jobs: int | None = None,
    scheduler: str | None = None,
    cache_dir: str | None = None,
    use_cache: bool = True,
    progress: Progress | None = None,
    k: float = robust.K,
    skipped: list[str] | None = None,
    force_align: bool = False,
    duplicates: list[dict[str, str]] | None = None,
) -> FleetResult:
    """Analyze every input (locally, or on Dask when `scheduler` is 'local' or an address).
    `skipped`: files the input scan passed over (inputs.collect), listed in the outputs;
    `duplicates`: repeats of a trace the scan counted once (inputs.collect), listed too.
    `force_align`: align and compare the traces of a run even when they are not captures of
    one job at one time (fleet/same_run.py)."""
    options = options or Options()
    jobs = jobs or usable_cpus()
    use_cache = use_cache and not os.environ.get(NO_CACHE_ENV)
    tasks = [Task(t.path, t.abspath, options, cache_dir, use_cache) for t in inputs]
    finished = 0

    def done(i: int, result: dict[str, Any]) -> None:
        nonlocal finished
        finished += 1
        if progress is not None:
            progress(finished, len(tasks), inputs[i], result)

    t0 = time.perf_counter()
    if scheduler:
        results = execute.run_dask(tasks, scheduler, jobs, done)
    else:
        results = execute.run_local(tasks, jobs, done)
    t1 = time.perf_counter()
    result = build(inputs, results, options_key(options), k, skipped, force_align, duplicates)
    result.timing = {
        "executor": f"dask {scheduler}" if scheduler else f"local, {jobs} job(s)",
        "analyze_s": round(t1 - t0, 3),
        "combine_s": round(time.perf_counter() - t1, 3),
        "cached": sum(bool(r["timing"]["cached"]) for r in results),
        "traces": [{"path": t.path, **r["timing"]} for t, r in zip(inputs, results, strict=True)],
    }
    return result


__all__ = ["FleetResult", "TraceInput", "run"]
