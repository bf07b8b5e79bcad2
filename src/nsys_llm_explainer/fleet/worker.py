"""The per-trace task that runs in a worker process (local pool or Dask worker).

summarize(task) analyzes one trace with api.explain (or takes the cached result, below),
reads the per-process numbers fleet needs (ranks(), below) and returns only that compact
summary: never the report or the trace's columns. It never raises: a failing trace comes back with its
error message (without the path, which the outputs show beside it), so the other traces go
on.

The few things fleet reads from one trace's report: its JSON document (report.json, with
the optional `diagnosis` object) and the per-step table of the steps metric.

ranks(): per process of one trace (one rank), the compact numbers fleet compares across ranks.

Read from the trace's columns (TraceData) and its report; nothing here is whole-trace sized
except transiently. Definitions (all per process, times in the trace's own clock):

- compute_ns: summed duration of its non-communication kernels; comm_kernel_ns: of its
  communication kernels (metrics/communication.py's pattern).
- busy_pct: union of its kernel intervals / its window (first kernel start to last end).
- exposed_comm_ns: per device it uses, the union of its communication kernels minus the part
  that non-communication kernels on that device overlap (as the communication metric).
- collectives: its communication kernels in start order (start, end, stream, kind, bytes;
  bytes is -1 because kernel records do not carry message sizes).
- steps: step boundaries of the steps metric, with the compute kernel time of the kernels
  that start inside each step.
- timeline: cumulative compute-busy and communication-busy ns at TIMELINE_BINS + 1 equally
  spaced instants of its window, so the coordinator can rebin it onto any common axis.

The cache (load_cached, store_cached): per-trace results kept between runs, so a rerun only
analyzes the traces that changed.

An entry is a directory <cache>/<key[:2]>/<key>/ holding the trace's report.json and the
fleet summary (summary.json). The key is the SHA-256 of:

- the trace's identity: its size, its modification time (ns) and the SHA-256 of its first
  and last MiB (an SQLite export rewrites its header's change counter on every write; a
  profiler JSON changes at its ends when events are added);
- the tool version, the identity of its installed code (each source, template and data
  file's path, size and modification time: a checkout edited between runs is new code even
  under the same version) and SUMMARY_VERSION (the layout of summary.json);
- the options that change numbers (kernel names, step range, phase map, categories, gaps).

summary.json holds the summary's JSON text with the key, the tool version, SUMMARY_VERSION and
the text's SHA-256: an entry that does not match all of them (truncated, damaged, written by
another version) is ignored and replaced. Entries are written atomically, so any number of
processes may share a cache. A cache changes only how fast a run is, never its output.

Location: --cache-dir, else $NSYS_LLM_EXPLAIN_CACHE, else $XDG_CACHE_HOME/nsys-llm-explain/fleet,
else ~/.cache/nsys-llm-explain/fleet; on a Dask cluster, each worker's own default unless
--cache-dir names a shared directory. An unwritable cache is skipped, never an error.
--no-cache, or the environment variable NSYS_LLM_EXPLAIN_NO_CACHE, turns it off."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import numpy as np
import pandas as pd

from nsys_llm_explainer import api
from nsys_llm_explainer.about import __version__
from nsys_llm_explainer.analysis import intervals
from nsys_llm_explainer.analysis.comm_kernels import comm_mask
from nsys_llm_explainer.analysis.groups import distinct_few
from nsys_llm_explainer.analysis.stats import percentiles
from nsys_llm_explainer.errors import ExplainError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import JsonObject, JsonValue, MetricResult, typed_result
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import json_writer
from nsys_llm_explainer.results.serving import Serving
from nsys_llm_explainer.trace import formats
from nsys_llm_explainer.trace.columns import factorize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

NA = "n/a"

# The per-process summary a worker returns (ranks(), below) and the per-trace result around
# it (summarize()). Arrays are int64 numpy arrays (encode()/decode() store them as JSON).


class ClockOrigin(TypedDict):
    origin_ns: int | None
    source: str | None
    reason: str | None


class Copies(TypedDict):
    ns: int
    count: int


class KernelName(TypedDict):
    name: str
    ns: int
    calls: int
    comm: bool


class TopNames(TypedDict):
    kernels: list[KernelName]
    other_ns: int


class StepsSummary(TypedDict):
    """status "ok" with the steps, or "skipped" with the reason."""
    status: str
    reason: NotRequired[str]
    count: NotRequired[int]
    p50_ns: NotRequired[int]
    p99_ns: NotRequired[int]
    start: NotRequired[np.ndarray]
    end: NotRequired[np.ndarray]
    compute_ns: NotRequired[np.ndarray]


class CollectiveArrays(TypedDict):
    """A process's communication kernels in start order, one array entry per kernel."""
    kinds: list[str]
    kind: np.ndarray  # index into kinds
    stream: np.ndarray
    start: np.ndarray
    end: np.ndarray
    bytes: np.ndarray


class TimelineCum(TypedDict):
    start_ns: int
    end_ns: int
    compute_cum: np.ndarray
    comm_cum: np.ndarray


class ProcessVerdict(TypedDict):
    verdict: str
    summary: str | None
    primary_kind: str | None
    primary_impact_pct: float | None


class World(TypedDict):
    """report.json trace.distributed."""
    rank: int | None
    world_size: int | None
    backend: str | None


ServingColumns = dict[str, np.ndarray]


class RankSummary(TypedDict):
    """One process of one trace: ranks() fills the first part, _analyze() the rest."""
    pid: int
    devices: list[int]
    clock: ClockOrigin
    kernel_count: int
    kernel_ns: int
    compute_ns: int
    comm_kernel_ns: int
    comm_ns: int
    exposed_comm_ns: int
    window_start_ns: int
    window_ns: int
    busy_ns: int
    copies: Copies | None
    names: TopNames
    steps: StepsSummary
    collectives: CollectiveArrays
    timeline: TimelineCum
    serving: NotRequired[ServingColumns | None]
    idle_causes: NotRequired[dict[str, int] | None]
    diagnosis: NotRequired[ProcessVerdict]
    world: NotRequired[World | None]
    gpus: NotRequired[list[str]]


class Rank(RankSummary):
    """A rank of a run: its summary and the index of the trace it came from."""
    trace_index: int


class CachedSummary(TypedDict):
    """What the cache keeps of a trace (summary.json)."""
    format: str | None
    ranks: list[RankSummary]
    warnings: int


class TaskTiming(TypedDict):
    seconds: float
    cached: bool
    cache_stored: bool
    worker: str


class TraceSummary(TypedDict):
    """summarize()'s result for one trace."""
    path: str
    ok: bool
    error: str | None
    format: str | None
    ranks: list[RankSummary]
    warnings: int
    timing: NotRequired[TaskTiming]


def as_dict(report: Any) -> JsonObject:
    """report.json as a dict (a Report with to_dict() provides it itself)."""
    to_dict = getattr(report, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    return json_writer.report_dict(report)


def json_text(doc: JsonObject) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def steps_frame(report: Any) -> pd.DataFrame | None:
    """Rows of tables/steps.csv (step, phase, pid, start_ns, end_ns, latency_ns ...)."""
    metrics = getattr(report, "metrics", {})
    outcome = metrics.get("steps") if isinstance(metrics, dict) else None
    if not isinstance(outcome, MetricResult):
        return None
    for table in outcome.tables:
        if table.name == "steps":
            return table.rows()
    return None


SERVING_FIELDS = ("sequences", "tokens", "kv_tokens", "gpu_span_ns")
PHASE_CODES = {"prefill": 0, "decode": 1, "mixed": 2}


def serving_points(report: Any) -> dict[int, ServingColumns]:
    """Per process: its serving iterations as columns (phase code, sequences, tokens,
    kv_tokens, gpu_span_ns; -1 where unknown) for the sweep's latency fits."""
    metrics = getattr(report, "metrics", {})
    s = typed_result(metrics, Serving) if isinstance(metrics, dict) else None
    if s is None:
        return {}
    out: dict[int, ServingColumns] = {}
    for pid in sorted({it.pid for it in s.iterations}):
        its = [it for it in s.iterations if it.pid == pid and it.phase in PHASE_CODES]
        cols = {"phase": np.array([PHASE_CODES[str(it.phase)] for it in its], dtype=np.int64)}
        for f in SERVING_FIELDS:
            cols[f] = np.array([-1 if getattr(it, f) is None else getattr(it, f) for it in its], dtype=np.int64)
        out[pid] = cols
    return out


def skipped_reason(doc: JsonObject, metric_id: str) -> str | None:
    metrics = doc.get("metrics")
    m = metrics.get(metric_id) if isinstance(metrics, dict) else None
    if isinstance(m, dict) and m.get("status") == "skipped":
        return str(m.get("reason"))
    if m is None:
        return f"the report has no {metric_id} metric"
    return None


def verdict_for(doc: JsonObject, pid: int) -> ProcessVerdict:
    """diagnosis.verdict/summary/primary of the process (where the diagnosis lists processes),
    else of the whole trace; "n/a" when the report carries no diagnosis."""
    diag = doc.get("diagnosis")
    out: ProcessVerdict = {"verdict": NA, "summary": None, "primary_kind": None, "primary_impact_pct": None}
    if not isinstance(diag, dict):
        return out
    src: JsonObject = diag
    procs = diag.get("processes")
    if isinstance(procs, list):
        for p in procs:
            if isinstance(p, dict) and p.get("pid") == pid and p.get("verdict"):
                src = p
                break
    raw = src.get("primary")
    primary: JsonObject = raw if isinstance(raw, dict) else {}
    out["verdict"] = str(src.get("verdict") or NA)
    summary = src.get("summary")
    out["summary"] = summary if isinstance(summary, str) else None
    kind = primary.get("kind")
    out["primary_kind"] = kind if isinstance(kind, str) else None
    pct = primary.get("impact_pct")
    out["primary_impact_pct"] = float(pct) if isinstance(pct, int | float) else None
    return out


def _objects(value: JsonValue) -> list[JsonObject]:
    """The objects of a JSON list (none when it is not a list)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def idle_for(doc: JsonObject, pid: int) -> dict[str, int] | None:
    """idle_causes: idle ns per cause over the devices this process owns (None: not measured)."""
    metrics = doc.get("metrics")
    m = metrics.get("idle_causes") if isinstance(metrics, dict) else None
    if not isinstance(m, dict) or m.get("status") != "ok":
        return None
    out: dict[str, int] = {}
    found = False
    for dev in _objects(m.get("devices")):
        owners = dev.get("owner_pids")
        if not isinstance(owners, list) or pid not in owners:
            continue
        found = True
        for c in _objects(dev.get("causes")):
            cause, ns = str(c["cause"]), c["idle_ns"]
            out[cause] = out.get(cause, 0) + int(ns if isinstance(ns, int | float) else 0)
    return out if found else None


def _trace(doc: JsonObject) -> JsonObject:
    t = doc.get("trace")
    return t if isinstance(t, dict) else {}


def world(doc: JsonObject) -> World | None:
    """Rank, world size and backend the trace records (report.json trace.distributed)."""
    d = _trace(doc).get("distributed")
    if not isinstance(d, dict):
        return None
    rank, size, backend = d.get("rank"), d.get("world_size"), d.get("backend")
    out: World = {"rank": rank if isinstance(rank, int) else None,
                  "world_size": size if isinstance(size, int) else None,
                  "backend": backend if isinstance(backend, str) else None}
    return out


def gpu_names(doc: JsonObject, devices: list[int]) -> list[str]:
    """Model names of the given devices (trace.gpus); "unknown model" where not recorded."""
    names = {g.get("device_id"): g.get("name") for g in _objects(_trace(doc).get("gpus"))}
    return [str(names.get(d) or "unknown model") for d in devices]


ARRAY_TAG = "int64"


@frozen
class Task:
    path: str  # shown in outputs
    abspath: str  # opened
    options: Options
    cache_dir: str | None  # None: the worker's default location
    use_cache: bool = True


def options_key(options: Options) -> JsonObject:
    """The options that change a trace's numbers (those that only change rendering do not)."""
    doc = options.to_json()
    for k in ("top_n", "max_gaps", "select", "ignore", "include_capture_info", "timeout_s"):
        doc.pop(k, None)
    return doc


def encode(value: Any) -> Any:
    """numpy arrays -> {"int64": [...]} so a summary can be stored as JSON."""
    if isinstance(value, np.ndarray):
        return {ARRAY_TAG: value.astype(np.int64).tolist()}
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and ARRAY_TAG in value:
            return np.asarray(value[ARRAY_TAG], dtype=np.int64)
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def _analyze(task: Task, path: Path) -> tuple[CachedSummary, str]:
    report = api.explain(path, task.options, jobs=1)
    doc = as_dict(report)
    data = formats.open_trace(path, kernel_name=task.options.kernel_name, jobs=1)
    try:
        per_rank = ranks(data, steps_frame(report), skipped_reason(doc, "steps"))
        points = serving_points(report)
        for r in per_rank:
            r["serving"] = points.get(r["pid"])
            r["idle_causes"] = idle_for(doc, r["pid"])
            r["diagnosis"] = verdict_for(doc, r["pid"])
            r["world"] = world(doc)
            r["gpus"] = gpu_names(doc, r["devices"])
    finally:
        data.close()
    fmt = formats.sniff(path)
    warnings = doc.get("warnings", [])
    summary: CachedSummary = {"format": fmt.word if fmt else None, "ranks": per_rank,
                              "warnings": len(warnings) if isinstance(warnings, list) else 0}
    return summary, json_text(doc)


def error_text(message: str, task: Task) -> str:
    """The error without the trace's path in front (outputs show it beside the error), and with
    the path as shown wherever the message names the file."""
    text = message.replace(task.abspath, task.path)
    for prefix in (f"{task.path}: ", f"{task.abspath}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def summarize(task: Task) -> TraceSummary:
    t0 = time.perf_counter()
    out: TraceSummary = {"path": task.path, "ok": False, "error": None, "format": None,
                         "ranks": [], "warnings": 0}
    timing: TaskTiming = {"seconds": 0.0, "cached": False, "cache_stored": False,
              "worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        path = Path(task.abspath)
        root = Path(task.cache_dir) if task.cache_dir else default_cache_dir()
        k = cache_key(trace_identity(path), options_key(task.options)) if task.use_cache else ""
        hit = load_cached(root, k) if task.use_cache else None
        summary: CachedSummary
        if hit is not None:
            summary = decode(hit)
            timing["cached"] = True
        else:
            summary, report_text = _analyze(task, path)
            if task.use_cache:
                timing["cache_stored"] = store_cached(root, k, report_text, encode(summary))
        out.update(summary)
        out["ok"] = True
    except ExplainError as exc:
        out["error"] = error_text(exc.message, task)
    except Unavailable as exc:  # a table fleet needs is not in the trace: a fact of the input
        out["error"] = exc.reason
    except OSError as exc:
        out["error"] = f"cannot read the trace ({exc.strerror or exc})"
    except Exception as exc:  # noqa: BLE001 - one trace's failure must not stop the others
        out["error"] = f"internal error ({type(exc).__name__}: {exc})"
    timing["seconds"] = round(time.perf_counter() - t0, 3)
    out["timing"] = timing
    return out


def unreadable(paths: list[str]) -> list[str]:
    """The paths this process cannot open for reading (run on a Dask worker)."""
    bad = []
    for p in paths:
        try:
            with open(p, "rb") as fh:
                fh.read(1)
        except OSError:
            bad.append(p)
    return bad


TIMELINE_BINS = 2048
TOP_NAMES = 200
_ALIASES = (
    (re.compile(r"cross_device_reduce|custom_?all_?reduce|quick_?reduce|lamport", re.I), "AllReduce"),
    (re.compile(r"all_?reduce", re.I), "AllReduce"),
    (re.compile(r"all_?gather", re.I), "AllGather"),
    (re.compile(r"reduce_?scatter", re.I), "ReduceScatter"),
    (re.compile(r"all_?to_?all", re.I), "AllToAll"),
    (re.compile(r"send_?recv", re.I), "SendRecv"),
    (re.compile(r"broadcast", re.I), "Broadcast"),
    (re.compile(r"reduce", re.I), "Reduce"),
    (re.compile(r"send", re.I), "Send"),
    (re.compile(r"recv", re.I), "Recv"),
)


def collective_kind(name: str) -> str:
    """AllReduce, AllGather, ... from a communication kernel name; else its bare function name."""
    for rx, kind in _ALIASES:
        if rx.search(name):
            return kind
    head = name.split("(", 1)[0].split("<", 1)[0].strip()
    return (head.split()[-1] if head else name).rsplit("::", 1)[-1] or "collective"


def cumulative_union(start: np.ndarray, end: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Covered length of the union of [start, end) up to each instant in `at`."""
    s, e = intervals.merge(start, end)
    if len(s) == 0:
        return np.zeros(len(at), dtype=np.int64)
    prefix = np.r_[0, np.cumsum(e - s)]
    i = np.searchsorted(s, at, side="right")  # intervals that started by then
    last = np.maximum(i - 1, 0)
    inside = np.clip(at - s[last], 0, (e - s)[last])
    return np.where(i > 0, prefix[last] + inside, 0).astype(np.int64)


def _per_device_exposed(k: Any, mine: np.ndarray, comm: np.ndarray) -> tuple[int, int]:
    union = exposed = 0
    for dev in distinct_few(k.device[mine]).tolist():
        on = k.device == dev
        c = on & mine & comm
        o = on & ~comm
        cs, ce = intervals.merge(k.start[c], k.end[c])
        os_, oe = intervals.merge(k.start[o], k.end[o])
        u = int((ce - cs).sum())
        union += u
        exposed += u - int(intervals.overlap_with_union(cs, ce, os_, oe).sum())
    return union, exposed


def _top_names(data: TraceData, name_id: np.ndarray, dur: np.ndarray, is_comm: np.ndarray) -> TopNames:
    codes, uniq = factorize(name_id)
    ns = np.bincount(codes, weights=dur, minlength=len(uniq)).astype(np.int64)
    calls = np.bincount(codes, minlength=len(uniq))
    comm = np.zeros(len(uniq), dtype=bool)
    comm[codes[is_comm]] = True
    lookup = data.kernel_names(np.asarray(uniq))
    order = np.lexsort((np.asarray(uniq), -ns))[:TOP_NAMES]
    rows: list[KernelName] = [
        {
            "name": lookup.get(int(uniq[i]), f"(unnamed kernel #{int(uniq[i])})"),
            "ns": int(ns[i]),
            "calls": int(calls[i]),
            "comm": bool(comm[i]),
        }
        for i in order.tolist()
    ]
    return {"kernels": rows, "other_ns": int(ns.sum() - sum(r["ns"] for r in rows))}


def _steps(frame: pd.DataFrame | None, reason: str | None, pid: int, cstart: np.ndarray,
           cdur: np.ndarray) -> StepsSummary:
    if frame is None:
        return {"status": "skipped", "reason": reason or "the steps metric found no steps"}
    mine = frame[frame["pid"] == pid].sort_values("start_ns", kind="stable")
    if mine.empty:
        return {"status": "skipped", "reason": "the steps metric found no step of this process"}
    s = mine["start_ns"].to_numpy(np.int64)
    e = mine["end_ns"].to_numpy(np.int64)
    order = np.argsort(cstart, kind="stable")
    cs = np.r_[0, np.cumsum(cdur[order])]
    st = cstart[order]
    compute = cs[np.searchsorted(st, e, "left")] - cs[np.searchsorted(st, s, "left")]
    lat = e - s
    p = percentiles(lat, (50, 99))
    return {
        "status": "ok",
        "count": int(len(s)),
        "p50_ns": int(p[50]),
        "p99_ns": int(p[99]),
        "start": s,
        "end": e,
        "compute_ns": compute.astype(np.int64),
    }


def _copies(data: TraceData, pid: int) -> Copies | None:
    total = count = 0
    seen = False
    for loader in (data.memcpy, data.memset):
        try:
            cols = loader()
        except Unavailable:
            continue
        seen = True
        sel = cols.pid == pid
        total += int(cols.dur[sel].sum())
        count += int(sel.sum())
    return {"ns": total, "count": count} if seen else None


def ranks(data: TraceData, steps_frame: pd.DataFrame | None, steps_reason: str | None) -> list[RankSummary]:
    """One compact record per process that ran kernels (pid order)."""
    k = data.kernels()
    if len(k) == 0:
        return []
    comm = comm_mask(data)
    try:
        origin = data.clock_origin()
        clock: ClockOrigin = {"origin_ns": origin.epoch_ns, "source": origin.source, "reason": None}
    except Unavailable as exc:
        clock = {"origin_ns": None, "source": None, "reason": exc.reason}
    out: list[RankSummary] = []
    for pid in sorted(distinct_few(k.pid).tolist()):
        mine = k.pid == pid
        c = mine & comm
        o = mine & ~comm
        start, end = k.start[mine], k.end[mine]
        w0, w1 = int(start.min()), int(end.max())
        busy = intervals.union_length(start, end)
        union, exposed = _per_device_exposed(k, mine, comm)
        edges = np.linspace(w0, w1, TIMELINE_BINS + 1).round().astype(np.int64)
        cidx = np.flatnonzero(c)
        cidx = cidx[np.argsort(k.start[cidx], kind="stable")]
        names = data.kernel_names(np.unique(k.name_id[cidx])) if len(cidx) else {}
        kinds_of = [collective_kind(names.get(int(i), "")) for i in k.name_id[cidx].tolist()]
        kind_codes, kind_names = pd.factorize(pd.Series(kinds_of, dtype=object), sort=True)
        out.append({
            "pid": int(pid),
            "devices": sorted(int(d) for d in distinct_few(k.device[mine])),
            "clock": clock,
            "kernel_count": int(mine.sum()),
            "kernel_ns": int(k.dur[mine].sum()),
            "compute_ns": int(k.dur[o].sum()),
            "comm_kernel_ns": int(k.dur[c].sum()),
            "comm_ns": union,
            "exposed_comm_ns": exposed,
            "window_start_ns": w0,
            "window_ns": w1 - w0,
            "busy_ns": busy,
            "copies": _copies(data, int(pid)),
            "names": _top_names(data, k.name_id[mine], k.dur[mine], comm[mine]),
            "steps": _steps(steps_frame, steps_reason, int(pid), k.start[o], k.dur[o]),
            "collectives": {
                "kinds": [str(x) for x in kind_names],
                "kind": np.asarray(kind_codes, dtype=np.int64),
                "stream": k.stream[cidx].astype(np.int64),
                "start": k.start[cidx].astype(np.int64),
                "end": k.end[cidx].astype(np.int64),
                "bytes": np.full(len(cidx), -1, dtype=np.int64),
            },
            "timeline": {
                "start_ns": w0,
                "end_ns": w1,
                "compute_cum": cumulative_union(k.start[o], k.end[o], edges),
                "comm_cum": cumulative_union(k.start[c], k.end[c], edges),
            },
        })
    return out


SUMMARY_VERSION = 2
EDGE_BYTES = 1 << 20
CACHE_ENV = "NSYS_LLM_EXPLAIN_CACHE"
REPORT_NAME = "report.json"
SUMMARY_NAME = "summary.json"


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "nsys-llm-explain" / "fleet"


def trace_identity(path: Path) -> dict[str, int | str]:
    st = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        digest.update(fh.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            fh.seek(max(st.st_size - EDGE_BYTES, EDGE_BYTES))
            digest.update(fh.read(EDGE_BYTES))
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "edges_sha256": digest.hexdigest()}


@functools.cache
def code_identity() -> str:
    """SHA-256 over the package's own files (relative path, size, mtime), computed once."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.suffix in (".py", ".j2", ".json") and "__pycache__" not in f.parts:
            st = f.stat()
            digest.update(f"{f.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def cache_key(ident: dict[str, int | str], options: JsonObject) -> str:
    doc = {"trace": ident, "tool": __version__, "code": code_identity(), "summary": SUMMARY_VERSION,
           "options": options}
    text = json.dumps(doc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_dir(root: Path, k: str) -> Path:
    return root / k[:2] / k


def load_cached(root: Path, k: str) -> JsonObject | None:
    """The summary stored under `k`, or None. An entry that is not exactly what store_cached() writes
    for `k` under this version (truncated, damaged, written by another version or for another
    key) is a miss, and is removed so that this run's result can take its place."""
    folder = entry_dir(root, k)
    try:
        text = (folder / SUMMARY_NAME).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    summary = _checked_summary(text, k)
    if summary is None:
        discard_entry(folder)
    return summary


def _checked_summary(text: str, k: str) -> JsonObject | None:
    try:
        doc = json.loads(text)
        inner = doc["summary"]
        if (doc["key"], doc["tool"], doc["summary_version"]) != (k, __version__, SUMMARY_VERSION):
            return None
        if hashlib.sha256(inner.encode("utf-8")).hexdigest() != doc["sha256"]:
            return None
        summary = json.loads(inner)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    ok = (isinstance(summary, dict) and isinstance(summary.get("ranks"), list)
          and type(summary.get("warnings")) is int and isinstance(summary.get("format"), str | None))
    return summary if ok else None


def discard_entry(folder: Path) -> None:
    """Remove an entry: renamed out of the way first, so no reader sees it half removed."""
    gone = folder.with_name(f".{folder.name[:8]}.gone-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(folder, gone)
    except OSError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def store_cached(root: Path, k: str, report_json: str, summary: JsonObject) -> bool:
    """Write the entry atomically (a temporary directory renamed into place); False when
    the cache cannot be written. Two workers storing the same key: the first one wins."""
    final = entry_dir(root, k)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{k[:8]}.tmp-", dir=final.parent))
    except OSError:
        return False
    try:
        (tmp / REPORT_NAME).write_text(report_json, encoding="utf-8")
        inner = json.dumps(summary)
        envelope = {"key": k, "tool": __version__, "summary_version": SUMMARY_VERSION,
                    "sha256": hashlib.sha256(inner.encode("utf-8")).hexdigest(), "summary": inner}
        (tmp / SUMMARY_NAME).write_text(json.dumps(envelope), encoding="utf-8")
        os.rename(tmp, final)
        return True
    except OSError:
        return final.is_dir()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
