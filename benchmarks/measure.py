"""The three measurements of a benchmark run: fetch floor, whole CLI run, per-metric breakdown."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# The columns the report needs from the three big tables: the floor fetches exactly these,
# once, with plain Python sqlite3 (no type checks, no arrays). Optional columns the kernel
# loader reads when the export has them (CUDA graph ids) are added when present.
FLOOR_QUERIES: dict[str, str] = {
    "CUPTI_ACTIVITY_KIND_KERNEL": 'SELECT start, "end", deviceId, streamId, correlationId, '
    "globalPid, demangledName{optional} FROM CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME": 'SELECT start, "end", globalTid, correlationId, nameId '
    "FROM CUPTI_ACTIVITY_KIND_RUNTIME",
    "NVTX_EVENTS": 'SELECT start, "end", eventType, globalTid, text, textId FROM NVTX_EVENTS '
    "WHERE eventType IN (59, 60)",
}
OPTIONAL_KERNEL_COLUMNS = ("graphNodeId", "graphId")
FETCH_ROWS = 65536
LOADER_TABLES = {"kernels": "CUPTI_ACTIVITY_KIND_KERNEL", "runtime": "CUPTI_ACTIVITY_KIND_RUNTIME",
                 "nvtx": "NVTX_EVENTS"}


def cached_trace(
    cfg: Any, path: Path, generate: Callable[[Any, Path], dict[str, Any]]
) -> tuple[Path, dict[str, Any], bool]:
    """(trace, expected totals, reused): the trace at `path` when its sidecar
    (`path`.expected.json) was written for the same parameters, else a new one from `generate`."""
    side = path.with_name(path.name + ".expected.json")
    if path.exists() and side.exists():
        expected = json.loads(side.read_text(encoding="utf-8"))
        if all(expected.get(k) == v for k, v in cfg.sidecar_key().items()):
            return path, expected, True
    return path, generate(cfg, path), False


def warm_cache(path: Path) -> None:
    """Read the file once so every timed phase finds it in the OS page cache."""
    with path.open("rb") as fh:
        while fh.read(1 << 24):
            pass


def _connect(path: Path) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    return sqlite3.connect(uri, uri=True)


def fetch_floor(path: Path) -> dict[str, dict[str, float]]:
    """Seconds and rows to fetch FLOOR_QUERIES, per table."""
    out: dict[str, dict[str, float]] = {}
    con = _connect(path)
    try:
        have = {r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")}
        optional = "".join(f", {c}" for c in OPTIONAL_KERNEL_COLUMNS if c in have)
        for table, template in FLOOR_QUERIES.items():
            sql = template.format(optional=optional)
            t0, c0 = time.perf_counter(), time.process_time()
            cur = con.execute(sql)
            rows = 0
            while batch := cur.fetchmany(FETCH_ROWS):
                rows += len(batch)
            out[table] = {"seconds": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                          "rows": rows}
    finally:
        con.close()
    return out


def _tree_rss_mib(pid: int) -> tuple[float, float]:
    """Resident memory of `pid` alone and of `pid` with its descendants, now (Linux /proc;
    0 elsewhere)."""
    total, main, todo = 0.0, 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1]) / 1024
                        total += rss
                        main = rss if p == pid else main
                        break
            with open(f"/proc/{p}/task/{p}/children", encoding="ascii") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return main, total


def run_cli(path: Path, out_dir: Path, *extra: str) -> dict[str, Any]:
    """The whole CLI (all metrics, all outputs) in a child process: wall time, CPU time of
    it and its helper processes, and peak memory: the largest single process (rusage) and
    the largest sum over the process tree at any moment (sampled every 20 ms)."""
    cmd = [sys.executable, "-m", "nsys_llm_explainer", str(path), "--out", str(out_dir), "--quiet", *extra]
    return run_cmd(cmd, out_dir)


def run_cmd(cmd: list[str], out_dir: Path, cwd: Path | None = None) -> dict[str, Any]:
    """run_cli's measurements for any command (its output goes to `out_dir`.log). Memory:
    peak_tree_rss_mib, the largest sum over the process tree at any moment, and
    peak_main_rss_mib, the main process alone (both sampled every 20 ms), and peak_rss_mib,
    the largest single process (rusage)."""
    log = out_dir.with_name(out_dir.name + ".log")
    peak_tree, peak_main = [0.0], [0.0]
    with log.open("wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.02):
                main, tree = _tree_rss_mib(proc.pid)
                peak_tree[0] = max(peak_tree[0], tree)
                peak_main[0] = max(peak_main[0], main)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # wait4 gives this child's own rusage (RUSAGE_CHILDREN would mix in other children);
        # it includes the helper processes the CLI waited for (CPU summed, RSS the largest).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        done.set()
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "exit_code": proc.returncode,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mib": usage.ru_maxrss / 1024,  # Linux reports KiB
        "peak_tree_rss_mib": peak_tree[0],
        "peak_main_rss_mib": peak_main[0],
        "log": log.read_text(encoding="utf-8", errors="replace")[-2000:],
    }


@contextmanager
def _patched(obj: Any, name: str, wrapper: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(obj, name)
    setattr(obj, name, wrapper(original))
    try:
        yield
    finally:
        setattr(obj, name, original)


def breakdown(path: Path) -> dict[str, Any]:
    """In-process, without load helpers: CPU seconds of each table loader and each metric
    (loading attributed separately), then the writers. explain() runs unchanged; timing wrappers are patched
    around it. CPU time, not wall time, so that other load on the machine does not count."""
    from contextlib import ExitStack

    from nsys_llm_explainer import api
    from nsys_llm_explainer.options import Options
    from nsys_llm_explainer.render import Format
    from nsys_llm_explainer.render.writers import build as build_files
    from nsys_llm_explainer.trace.nsys.load import NsysTraceData

    loads: dict[str, float] = {}
    metrics: dict[str, float] = {}
    loading = [0.0]  # seconds spent in loaders so far

    def time_loader(name: str) -> Callable[[Any], Any]:
        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            def inner(self: Any, *a: Any, **k: Any) -> Any:
                t0 = time.process_time()
                try:
                    return fn(self, *a, **k)
                finally:
                    dt = time.process_time() - t0
                    loads[name] = loads.get(name, 0.0) + dt
                    loading[0] += dt
            return inner
        return wrap

    def time_metric(fn: Callable[..., Any]) -> Callable[..., Any]:
        def inner(metric: Any, ctx: Any) -> Any:
            before, t0 = loading[0], time.process_time()
            try:
                return fn(metric, ctx)
            finally:
                metrics[metric.id] = time.process_time() - t0 - (loading[0] - before)
        return inner

    with ExitStack() as stack:
        for attr in sorted(vars(NsysTraceData)):
            if attr.startswith("_load_") and callable(getattr(NsysTraceData, attr)):
                stack.enter_context(_patched(NsysTraceData, attr, time_loader(attr[len("_load_"):])))
        stack.enter_context(_patched(api, "run_metric", time_metric))
        t0 = time.process_time()
        report = api.explain(path, Options(), jobs=1)  # every loader timed in this process
        explain_s = time.process_time() - t0
    t0 = time.process_time()
    files = build_files(report, tuple(Format))
    render_s = time.process_time() - t0
    return {
        "explain_s": explain_s,
        "load_s": loads,
        "metric_s": metrics,
        "other_s": explain_s - sum(loads.values()) - sum(metrics.values()),
        "render_s": render_s,
        "output_bytes": sum(len(text) for text in files.values()),
        "statuses": {mid: getattr(o, "status", "?") for mid, o in report.metrics.items()},
    }


def check_totals(report_json: Path, expected: dict[str, Any]) -> list[str]:
    """Differences between the run's report.json and the generator's sidecar (empty = ok)."""
    metrics = json.loads(report_json.read_text(encoding="utf-8"))["metrics"]
    problems = []
    tk = metrics.get("top_kernels", {})
    if tk.get("total_kernel_ns") != expected["kernel_ns"]:
        problems.append(f"top_kernels.total_kernel_ns {tk.get('total_kernel_ns')} != "
                        f"{expected['kernel_ns']}")
    devices = metrics.get("gpu_idle", {}).get("devices", [])
    busy = {str(d["device_id"]): d["busy_ns"] for d in devices}
    if busy != expected["busy_ns"]:
        problems.append(f"gpu_idle busy_ns {busy} != {expected['busy_ns']}")
    att = metrics.get("nvtx_attribution", {}).get("attributed_ns")
    if att != expected["attributed_ns"]:
        problems.append(f"nvtx_attribution.attributed_ns {att} != {expected['attributed_ns']}")
    return problems
