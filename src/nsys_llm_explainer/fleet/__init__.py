"""fleet: many traces at once. Ranks of one job (one trace per rank, or one trace holding
several processes) compared with each other, and runs of a sweep compared by label.

Each trace is analyzed on its own (api.explain, cached), in local worker processes or on a
Dask cluster; only compact per-rank summaries come back (worker.py), and the cross-rank
analyses run on those.

run() runs the per-trace tasks in this process, in a local process pool (run_local), or on
Dask (run_dask).

Results come back in task order whatever order they finish in; `done` is called as each
finishes (progress). Dask is optional: `pip install 'nsys-llm-explain[distributed]'`.

A scheduler address that refuses the connection or does not resolve fails at once (a TCP
probe before the Dask client, which would retry until CONNECT_TIMEOUT_S); a scheduler with no
worker after CONNECT_TIMEOUT_S fails too. Both are input errors (exit 3) in one line. The
LocalCluster listens on 127.0.0.1 only, its HTTP endpoint on a free port with no dashboard.

build() goes from the per-trace summaries to the fleet result: runs, their ranks and
analyses, the sweep.

The result (fleet.json and every other output) depends only on the inputs and options,
never on where or how fast the traces were analyzed: run facts (worker, seconds, cache
hits) go to `timing`, which is written to fleet_timing.json on its own."""

from __future__ import annotations

import logging
import multiprocessing
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import urlsplit

import pandas as pd

from nsys_llm_explainer.about import TOOL_NAME, __version__
from nsys_llm_explainer.errors import InputError, UsageError
from nsys_llm_explainer.fleet import robust, runs
from nsys_llm_explainer.fleet.inputs import TraceInput
from nsys_llm_explainer.fleet.runs import FleetDoc, SweepRow, TraceRow
from nsys_llm_explainer.fleet.worker import (
    RankSummary,
    Task,
    TaskTiming,
    TraceSummary,
    options_key,
    summarize,
    unreadable,
)
from nsys_llm_explainer.model import JsonObject
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render.templates import NO_CACHE_ENV
from nsys_llm_explainer.runtime.machine import usable_cpus

Progress = Callable[[int, int, TraceInput, TraceSummary], None]


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

    def done(i: int, result: TraceSummary) -> None:
        nonlocal finished
        finished += 1
        if progress is not None:
            progress(finished, len(tasks), inputs[i], result)

    t0 = time.perf_counter()
    if scheduler:
        results = run_dask(tasks, scheduler, jobs, done)
    else:
        results = run_local(tasks, jobs, done)
    t1 = time.perf_counter()
    result = build(inputs, results, options_key(options), k, skipped, force_align, duplicates)
    result.timing = {
        "executor": f"dask {scheduler}" if scheduler else f"local, {jobs} job(s)",
        "analyze_s": round(t1 - t0, 3),
        "combine_s": round(time.perf_counter() - t1, 3),
        "cached": sum(bool(_timing(r)["cached"]) for r in results),
        "traces": [{"path": t.path, **_timing(r)} for t, r in zip(inputs, results, strict=True)],
    }
    return result


Done = Callable[[int, TraceSummary], None]
INSTALL_HINT = f"pip install '{TOOL_NAME}[distributed]'"
CONNECT_TIMEOUT_S = 20
PROBE_TIMEOUT_S = 3


def run_local(tasks: list[Task], jobs: int, done: Done) -> list[TraceSummary]:
    results: list[TraceSummary | None] = [None] * len(tasks)
    if jobs <= 1 or len(tasks) <= 1:
        for i, t in enumerate(tasks):
            results[i] = result = summarize(t)
            done(i, result)
        return _all(results)
    # spawn: workers start from a clean interpreter, whatever threads this process has.
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
        futures = {pool.submit(summarize, t): i for i, t in enumerate(tasks)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = result = fut.result()
            done(i, result)
    return _all(results)


def _all(results: list[TraceSummary | None]) -> list[TraceSummary]:
    """Every task's result (each is set once its task finishes)."""
    return [r for r in results if r is not None]


def _timing(result: TraceSummary) -> TaskTiming:
    timing = result.get("timing")
    assert timing is not None, "summarize() sets the timing"
    return timing


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UsageError(f"--scheduler needs Dask: {INSTALL_HINT}") from None
    return distributed


def run_dask(tasks: list[Task], scheduler: str, jobs: int, done: Done) -> list[TraceSummary]:
    """scheduler: 'local' (a LocalCluster of `jobs` single-threaded worker processes) or the
    address of a running scheduler (tcp://HOST:PORT)."""
    distributed = _distributed()
    cluster = None
    try:
        if scheduler == "local":
            cluster = distributed.LocalCluster(
                n_workers=jobs, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address=":0", scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR,
            )
            client = distributed.Client(cluster, set_as_default=False)
        else:
            probe(scheduler)
            try:
                client = distributed.Client(
                    scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False
                )
            except (OSError, TimeoutError) as exc:
                raise InputError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        try:
            return _submit(client, tasks, scheduler, done, distributed)
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


def probe(scheduler: str) -> None:
    """InputError at once when a tcp:// scheduler address refuses the connection or does not
    resolve; any other outcome (listening, slow, another protocol) is left to the Dask client."""
    parts = urlsplit(scheduler)
    if parts.scheme != "tcp" or not parts.hostname:
        return
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"--scheduler {scheduler}: not a valid port") from None
    if port is None:
        return
    try:
        with socket.create_connection((parts.hostname, port), timeout=PROBE_TIMEOUT_S):
            return
    except ConnectionRefusedError:
        raise InputError(f"--scheduler {scheduler}: connection refused (no scheduler listens there)") from None
    except socket.gaierror as exc:
        raise InputError(f"--scheduler {scheduler}: cannot resolve {parts.hostname} ({exc.strerror})") from None
    except OSError:
        return


def _submit(client: Any, tasks: list[Task], scheduler: str, done: Done, distributed: Any) -> list[TraceSummary]:
    if not client.scheduler_info().get("workers"):
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
        except TimeoutError:
            raise InputError(
                f"--scheduler {scheduler}: no worker joined the scheduler within {CONNECT_TIMEOUT_S} s "
                f"(start some with: dask worker {scheduler})"
            ) from None
    paths = [t.abspath for t in tasks]
    bad = client.submit(unreadable, paths, pure=False).result()
    if bad:
        raise InputError(
            f"--scheduler {scheduler}: a worker cannot read {len(bad)} of {len(paths)} traces "
            f"(first: {bad[0]}); put them where every worker sees the same path"
        )
    futures = client.map(summarize, tasks, pure=False)
    index = {f.key: i for i, f in enumerate(futures)}
    results: list[TraceSummary | None] = [None] * len(tasks)
    for fut in distributed.as_completed(futures, loop=client.loop):
        i = index[fut.key]
        results[i] = result = fut.result()
        done(i, result)
    return _all(results)


SCHEMA_VERSION = "1.1"


class TraceTiming(TaskTiming):
    path: str


class FleetTiming(TypedDict, total=False):
    """fleet_timing.json: where and how fast the traces were analyzed."""
    executor: str
    analyze_s: float
    combine_s: float
    cached: int
    traces: list[TraceTiming]


@dataclass
class FleetResult:
    doc: FleetDoc
    runs: list[runs.Run]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    timing: FleetTiming = field(default_factory=FleetTiming)


def build(inputs: list[TraceInput], results: list[TraceSummary], options: JsonObject,
          k: float = robust.K, skipped: list[str] | None = None, force_align: bool = False,
          duplicates: list[dict[str, str]] | None = None) -> FleetResult:
    by_label: dict[str, list[int]] = {}
    for i, t in enumerate(inputs):
        by_label.setdefault(t.label, []).append(i)
    labels = list(by_label)
    built: list[runs.Run] = []
    sweep_rows: list[SweepRow] = []
    sweep_members: list[tuple[str, list[RankSummary]]] = []
    for li in runs.sweep_order(labels):
        label = labels[li]
        members = [(i, inputs[i].path, s) for i in by_label[label] if results[i]["ok"]
                   for s in results[i]["ranks"]]
        if not members:
            continue
        run = runs.build(label, inputs[by_label[label][0]].labels, members, k, force_align)
        built.append(run)
        sweep_rows.append(runs.sweep_row(run.doc, [m[2] for m in members]))
        sweep_members.append((label, [m[2] for m in members]))
    traces: list[TraceRow] = [
        {"path": t.path, "label": t.label, "format": r["format"], "ok": bool(r["ok"]),
         "error": r["error"], "ranks": len(r["ranks"]), "warnings": int(r["warnings"])}
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
        tables["sweep"] = runs.sweep_table(sweep_rows)
    doc: FleetDoc = {
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
        "sweep": {"rows": sweep_rows,
                  "numeric_labels": runs.numeric_labels([r["label"] for r in sweep_rows]) is not None,
                  "check": runs.sweep_check(sweep_members), "fits": runs.sweep_fits(sweep_members)}
        if len(built) > 1 else None,
    }
    doc["verdict"] = verdict_line(doc)
    return FleetResult(doc, built, tables)


def verdict_line(doc: FleetDoc) -> str:
    from nsys_llm_explainer.fleet.render_text import verdict

    return verdict(doc)


__all__ = ["FleetResult", "TraceInput", "run"]
