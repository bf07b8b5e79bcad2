"""What the launching thread was doing while the GPU sat idle because of the host.

The host-caused idle time of a device is its sync_wait, launch_bound and host_other time
(idle_sweep). Each piece of it belongs to the thread that launched the work ending its gap
(the thread that was late); when that work has no launch call, to the thread that launched
most of the device's kernels. What that thread was inside, at every instant, comes from the
records the trace holds for it:

- annotation ranges: NVTX ranges (Nsight Systems), PyTorch profiler `user_annotation` and
  `cpu_op` events (they are the nvtx() table of those traces);
- OS runtime calls (Nsight Systems `OSRT_API`: read, poll, locks, sleeps);
- CUDA API calls other than kernel launches (allocation, event queries, copies; a copy call
  that blocks the host, idle_sweep's pageable copies, is named "<api> (blocking copy)");
- where no range covers the instant: the PyTorch profiler's Python frames (`with_stack`),
  then Nsight Systems CPU samples on that thread (counted, not timed).

A piece is cut wherever a record on its thread starts or ends, so every sub-piece has one
stack. Range names are normalized (analysis/nvtx) and their instance numbers replaced
(`layer_9` -> `layer_N`), so a loop's layers are one source. A sub-piece's source is the
outermost record of its stack below the step: the step ranges (ProfilerStep#N, the
--step-range name, the ranges the steps metric used) and containers (a range at least
CONTAINER_SHARE of the device's window long: an epoch, `main`) are not sources; their insides
are, unless nothing is recorded inside them there and their name has a family: then the
container is (a DataLoader range over most of the window). The innermost record is kept as
detail (`aten::stack` inside the DataLoader range, `read` inside it). Its family is the first
of FAMILIES, in that order, that any record of the stack from the innermost up to the source
matches: a DataLoader range with reads inside is data loading, an allocation inside a forward
pass is allocation. Activation checkpointing
(`checkpoint_wrapper`, `_checkpoint_wrapped_module`, CheckpointFunction) is framework work, and
where a thread's records show it, so is a range named only `checkpoint`: the forward
recomputed, not a checkpoint saved.

Time after a synchronize or read-back that was in flight when the gap began (the call drained
the GPU's queue; a bulk synchronous copy moves data the host asked for and does not count) and
returned before it is that call's ("after aten::item", family sync), unless a more specific
family than framework operators holds it: the host could have done that work while the GPU
still had work queued.

Every nanosecond of host-caused idle time gets exactly one source (or none: "unnamed"), so
the sources of a device add up to its host-caused idle time.

Per-layer sync stalls: a tiny host-to-device copy from pageable memory, then a synchronize
that holds the host for milliseconds, once per layer.

A stall is a host-to-device copy of at most STALL_COPY_BYTES from pageable host memory (a
Python scalar or list sent to the GPU: `torch.tensor(x, device="cuda")`, a mask or index
built on the host) whose call is followed on the same thread, within READBACK_GAP_NS of its
return, by a blocking synchronize (cudaStreamSynchronize, cudaDeviceSynchronize ...), the
pair holding the host at least STALL_MIN_NS from the copy call's start to the synchronize's
return. The host waits for the GPU's whole queue once per layer, so it queues the next layer's
work only after the GPU drained.

Each stall is placed in its repeated unit: the innermost range around the synchronize whose
name carries an instance number (`layer_7`, `model.layers.7`), named with the numbers replaced
(`layer_N`), and the instances counted (the layers). The GPU cost is read-backs' (analysis/blocking.py
cost): idle time with nothing queued while the host was blocked, plus the idle time after the
return until the host queued more work."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import field

import numpy as np

from nsys_llm_explainer.analysis import intervals, nvtx
from nsys_llm_explainer.analysis.blocking import (
    BLOCKING_APIS,
    READBACK_GAP_NS,
    Calls,
    HostRows,
    call_origins,
    find_blocking,
    sync_kinds,
)
from nsys_llm_explainer.analysis.groups import distinct, distinct_few, group_rows, group_sum
from nsys_llm_explainer.analysis.join import cached_range_index, kernel_launch_index, launch_api_mask, match_calls
from nsys_llm_explainer.analysis.nvtx import normalize, normalized_names
from nsys_llm_explainer.analysis.program import scrub
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.trace.columns import Columns, factorize
from nsys_llm_explainer.trace.data import TraceData, Unavailable

CONTAINER_SHARE = 0.5
TOP_SOURCES = 8
ACTIVATION_CHECKPOINT = (r"checkpoint_?wrap|CheckpointFunction|CheckpointWrapper|utils[./]checkpoint|"
                         r"activation_?checkpoint|checkpoint_(?:without|with)_reentrant|non_?reentrant|recompute")
# Ordered by precedence (module docstring): (family, pattern over a record's name).
FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("data_loading", re.compile(
        r"dataloader|data_?loader|_next_data|collate|get_?batch|load_?batch|next_?batch|input_?pipeline|"
        r"dataset|prefetch|tf\.data|dali", re.IGNORECASE)),
    ("optimizer", re.compile(
        r"optimizer|zero_grad|clip_grad|lr_scheduler|grad_?scaler|(?<![a-z])(adamw?|sgd|lamb|lion|adagrad|rmsprop)"
        r"(?![a-z])", re.IGNORECASE)),
    ("sync", re.compile(
        r"aten::(item|_local_scalar_dense|is_nonzero|tolist|nonzero|masked_select)\b|\.item\(|\.cpu\(|"
        r"\btolist\b|Synchronize|\(blocking copy\)$|^(cuda|hip)Memcpy(_v\d+)?$|^cuMemcpy[A-Z]to[A-Z]\w*$",
        re.IGNORECASE)),
    ("allocation", re.compile(
        r"^(cuda|cu|hip)(Malloc|Free|HostAlloc|HostRegister|HostUnregister|MemAlloc|MemFree|MemCreate|"
        r"MemRelease|MemHostAlloc|MallocAsync|FreeAsync|MallocHost|FreeHost)\w*$|caching_?allocator|empty_cache",
        re.IGNORECASE)),
    ("communication", re.compile(
        r"^(nccl[A-Z]\w*|nccl:\w+|c10d::\w+|gloo:\w+|MPI_\w+|ProcessGroup\w*[:.]\w+|record_param_comms)\b|"
        r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|barrier", re.IGNORECASE)),
    ("file_io", re.compile(
        r"^(read|readv|pread\w*|fread|fgets|getline|recv\w*|open\w*|fopen\w*|stat\w*|fstat\w*|lseek\w*|"
        r"mmap\w*|write|writev|pwrite\w*|fwrite|fflush|fsync|send\w*)$")),
    ("waiting", re.compile(
        r"^(poll|ppoll|select|pselect\w*|epoll_\w+|pthread_(mutex|rwlock|spin)_\w*lock|pthread_cond_\w*wait|"
        r"sem_\w*wait|futex|pthread_join|wait\w*|nanosleep|clock_nanosleep|usleep|sleep|sched_yield)$")),
    ("serving_host", re.compile(
        r"schedul|detokeniz|tokeniz|sampl(e|er|ing)\b|process_output|prepare_input|update_states|"
        r"execute_model|output_processor", re.IGNORECASE)),
    # Activation checkpointing (recomputing the forward in backward: `checkpoint_wrapper`,
    # `_checkpoint_wrapped_module`, torch.utils.checkpoint's CheckpointFunction) is framework
    # work, not saving a checkpoint.
    ("logging_checkpoint", re.compile(
        rf"^(?!.*(?:{ACTIVATION_CHECKPOINT})).*(checkpoint|save_?state|tensorboard|wandb|logging|log_metrics)",
        re.IGNORECASE)),
    ("framework", re.compile(
        rf"^aten::|^## .* ##$|forward|backward|autograd|nn\.Module|CompiledFunction|Torch-Compiled|"
        rf"{ACTIVATION_CHECKPOINT}",
        re.IGNORECASE)),
)
FAMILY_NAMES = tuple(f for f, _ in FAMILIES)
RANGE, OS, CUDA, PYTHON = "range", "os", "cuda", "python"


@frozen
class Source:
    name: str
    kind: str  # RANGE, OS, CUDA or PYTHON
    family: str | None
    ns: int
    inner: str | None = None  # the innermost record inside it that held most of its time


@frozen
class DeviceSources:
    device_id: int
    idle_ns: int  # host-caused idle time (sync_wait + launch_bound + host_other)
    sources: tuple[Source, ...]  # largest first, all of them
    families: dict[str, int]  # family -> ns (sources without a family are not counted)
    unnamed_ns: int  # no record on the launching thread covers it
    samples: dict[str, int] = field(default_factory=dict)  # CPU samples in unnamed time: symbol -> count

    @property
    def named_ns(self) -> int:
        return self.idle_ns - self.unnamed_ns


_NUMBER = re.compile(r"(?<=[_.#:\-\s])\d+(?=$|[_.#:\-\s])")


def numbered(name: str) -> str:
    """A range name with its instance numbers replaced (`layer_9`, `encoder.block.14.layer.0`
    -> `layer_N`, `encoder.block.N.layer.N`), so that the layers of a loop are one source."""
    return _NUMBER.sub("N", name)


# Matches where some family's pattern matches: one search rules most names out.
_ANY_FAMILY = re.compile("|".join(
    f"(?i:{p.pattern})" if p.flags & re.IGNORECASE else f"(?:{p.pattern})" for _, p in FAMILIES
))


@functools.lru_cache(maxsize=1 << 16)
def family_of(name: str) -> int:
    """Index into FAMILIES of the first family whose pattern matches, or -1."""
    if _ANY_FAMILY.search(name) is None:
        return -1
    for i, (_, pattern) in enumerate(FAMILIES):
        if pattern.search(name):
            return i
    return -1


_ACTIVATION = re.compile(ACTIVATION_CHECKPOINT, re.IGNORECASE)
_SAVING = re.compile(r"save|tensorboard|wandb|logging|log_metrics|write|dcp|async_save", re.IGNORECASE)


def _activation_checkpoints(names: list[str], used: np.ndarray, fam_of_name: np.ndarray) -> None:
    """Where the threads' records show activation checkpointing (`checkpoint_wrapper`,
    `_checkpoint_wrapped_module`), a range named only `checkpoint` is that too: framework work
    that recomputes the forward, not a checkpoint being saved (in place on fam_of_name)."""
    logging, framework = FAMILY_NAMES.index("logging_checkpoint"), FAMILY_NAMES.index("framework")
    if not any(_ACTIVATION.search(names[i]) for i in used.tolist()):
        return
    for i in used.tolist():
        if fam_of_name[i] == logging and "checkpoint" in names[i].lower() and not _SAVING.search(names[i]):
            fam_of_name[i] = framework


@frozen
class _Records:
    """Host records of some threads, as one range table for the NVTX range index."""

    cols: Columns  # start, end, tkey, name (index into names), kind (index into KINDS)
    names: list[str]

    @staticmethod
    def empty() -> _Records:
        return _Records(Columns.empty("host", ("start", "end", "tkey", "name", "kind")), [])


KINDS = (RANGE, OS, CUDA, PYTHON)


def _optional(load) -> Columns | None:  # type: ignore[no-untyped-def]
    try:
        cols = load()
    except Unavailable:
        return None
    return cols if len(cols) else None


def _sync_apis(names: list[str]) -> np.ndarray:
    return np.flatnonzero(sync_kinds(names) == 1)


# Per trace, built once for every device's call: the source name of each raw NVTX name and
# of each operator (Python frame) name.
RANGE_NAMES_KEY = "host_source_names:range"
PYTHON_NAMES_KEY = "host_source_names:python"


def _range_names(data: TraceData) -> list[str]:
    """Per raw NVTX name code: its normalized name with instance numbers replaced (once per
    distinct normalized name: PyTorch's emit_nvtx names are unique per call)."""
    norm, codes = normalized_names(data)
    source = [numbered(n) for n in norm]
    return [source[c] for c in codes.tolist()]


def _records(data: TraceData, threads: np.ndarray, python: bool) -> _Records:
    """Ranges, OS calls and non-launch CUDA calls of `threads` (python: Python frames only)."""
    # (columns with start, end, tkey and name; their names; kind; the rows that may count)
    parts: list[tuple[Columns, list[str], int, np.ndarray | None]] = []
    if python:
        py = _optional(data.python_functions)
        if py is not None:
            parts.append((py, data.cached(PYTHON_NAMES_KEY, lambda: [scrub(n) for n in data.operator_names()]),
                          KINDS.index(PYTHON), None))
    else:
        nv = _optional(data.nvtx)
        if nv is not None:
            parts.append((nv, data.cached(RANGE_NAMES_KEY, lambda: _range_names(data)), KINDS.index(RANGE), None))
        os_calls = _optional(data.os_calls)
        if os_calls is not None:
            parts.append((os_calls, data.os_call_names(), KINDS.index(OS), None))
        rt = _optional(data.runtime)
        if rt is not None:
            names = data.runtime_api_names()
            keep = ~launch_api_mask(names)[rt.api]
            blocking_copy = HostRows.of(data).blocking & ~np.isin(rt.api, _sync_apis(names))
            name = np.where(blocking_copy, rt.api + len(names), rt.api)
            del blocking_copy
            # the four columns read below, filtered once with the thread test (not a copy of
            # every runtime column for the calls that are not launches)
            calls = Columns("runtime", {"start": rt.start, "end": rt.end, "tkey": rt.tkey, "name": name})
            parts.append((calls, [*names, *(f"{n} (blocking copy)" for n in names)], KINDS.index(CUDA), keep))
    if not parts:
        return _Records.empty()
    labels: list[str] = []
    chosen = []  # (columns, selected rows, their count, name offset, kind)
    for cols, part_names, kind, may in parts:
        sel = np.isin(cols.tkey, threads) & (cols.end >= cols.start)
        if may is not None:
            sel &= may
        chosen.append((cols, sel, int(sel.sum()), len(labels), kind))
        labels.extend(part_names)
    # The parts' rows written into one array per column (as np.concatenate of the parts would
    # make them, without holding the parts beside the result).
    total = sum(count for _, _, count, _, _ in chosen)
    out = {key: np.empty(total, dtype=np.result_type(*(cols[key].dtype for cols, *_ in chosen)))
           for key in ("start", "end", "tkey", "name")}
    out["kind"] = np.empty(total, dtype=np.int64)
    at = 0
    for cols, sel, count, offset, kind in chosen:
        part = slice(at, at + count)
        for key in ("start", "end", "tkey", "name"):
            out[key][part] = cols[key][sel]
        out["name"][part] += offset
        out["kind"][part] = kind
        at += count
    return _Records(Columns("host", out), labels)


def _split(tkey: np.ndarray, s: np.ndarray, e: np.ndarray, rec: Columns) -> tuple[np.ndarray, ...]:
    """The pieces cut wherever a record of their thread starts or ends."""
    out_t, out_s, out_e, out_i = [], [], [], []
    for t in distinct_few(tkey).tolist():
        mine = np.flatnonzero(tkey == t)
        sel = rec.tkey == t
        cuts = distinct(np.concatenate((rec.start[sel], rec.end[sel])))
        lo = np.searchsorted(cuts, s[mine], "right")
        hi = np.searchsorted(cuts, e[mine], "left")
        n = hi - lo + 1
        piece = np.repeat(mine, n)
        rank = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        first = np.repeat(lo, n)
        inner_cut = cuts[np.minimum(first + rank - 1, max(len(cuts) - 1, 0))] if len(cuts) else s[piece]
        start = np.where(rank == 0, s[piece], inner_cut)
        last = rank == np.repeat(n - 1, n)
        end = np.where(last, e[piece], cuts[np.minimum(first + rank, max(len(cuts) - 1, 0))] if len(cuts) else e[piece])
        out_t.append(np.full(len(piece), t, np.int64))
        out_s.append(start)
        out_e.append(end)
        out_i.append(piece)
    if not out_t:
        empty = np.empty(0, np.int64)
        return empty, empty, empty, empty
    return np.concatenate(out_t), np.concatenate(out_s), np.concatenate(out_e), np.concatenate(out_i)


def _launch_thread(data: TraceData, device: int) -> int:
    """The thread that launched most of the device's kernels (-1 when none is known)."""
    k = data.kernels()
    call = kernel_launch_index(data)
    sel = (k.device == device) & (call >= 0)
    if not sel.any():
        return -1
    keys, counts = np.unique(data.runtime().tkey[call[sel]], return_counts=True)
    return int(keys[np.argmax(counts)])


def _pieces(data: TraceData, gc, host_side: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """(thread, start, end) of every piece of host-caused idle time of one device."""
    rt = data.runtime()
    s = np.concatenate([gc.segments[c][0] for c in host_side])
    e = np.concatenate([gc.segments[c][1] for c in host_side])
    gap = np.clip(np.searchsorted(gc.gap_start, s, "right") - 1, 0, max(len(gc.gap_start) - 1, 0))
    call = gc.next_call[gap] if len(gc.next_call) else np.full(len(s), -1, np.int64)
    main = _launch_thread(data, gc.device_id)
    tkey = np.where(call >= 0, rt.tkey[np.maximum(call, 0)], main) if len(rt) else np.full(len(s), main)
    return tkey.astype(np.int64), s, e


def _attribute(records: _Records, tkey: np.ndarray, s: np.ndarray, e: np.ndarray,
               skip_names: set[str], container_ns: int) -> tuple[np.ndarray, ...]:
    """Per elementary piece: (start, end, source name id or -1, family or -1, inner name id or
    -1, piece index)."""
    rec = records.cols
    pt, ps, pe, pi = _split(tkey, s, e, rec)
    index = nvtx.build(rec)
    if len(index.order) == 0:
        none = np.full(len(ps), -1, np.int64)
        return ps, pe, none, none, none, pi
    name = rec.name[index.order]
    skip_set = skip_names | {numbered(normalize(n)) for n in skip_names}
    skip_name = np.array([n in skip_set for n in records.names] or [False])
    skip = skip_name[name] | (index.end - index.start >= container_ns)
    fam_of_name = np.full(max(len(records.names), 1), -1, np.int64)
    used = np.unique(name)
    fam_of_name[used] = [family_of(records.names[i]) for i in used.tolist()]
    _activation_checkpoints(records.names, used, fam_of_name)
    fam = fam_of_name[name]
    mid = ps + (pe - ps) // 2
    inner = nvtx.innermost(index, pt, mid, mid)
    src, _, family = nvtx.climb(index, inner, skip, fam)
    # A container of a known family with nothing recorded inside it at that instant is the
    # source itself (a DataLoader range over most of the window); a step range never is.
    at = np.maximum(inner, 0)
    leaf = ((src < 0) & (inner >= 0) & ~skip_name[name[at]] & (fam[at] >= 0)
            & (index.end[at] - index.start[at] >= container_ns))
    src = np.where(leaf, inner, src)
    family = np.where(leaf, fam[at], family)
    src_name = np.where(src >= 0, name[np.maximum(src, 0)], -1)
    inner_name = np.where((inner >= 0) & (src >= 0), name[np.maximum(inner, 0)], -1)
    return ps, pe, src_name, family, inner_name, pi


def _heaviest(codes: np.ndarray, values: np.ndarray, ns: np.ndarray, ngroups: int) -> np.ndarray:
    """Per group of `codes`: the value of `values` whose rows hold the most of `ns` (ties: the
    smallest value)."""
    if len(codes) == 0:
        return np.empty(ngroups, dtype=values.dtype)
    pair, first = group_rows(codes, values)
    sums = group_sum(ns, pair, len(first))
    group, value = codes[first], values[first]
    order = np.lexsort((value, -sums, group))
    lead = order[np.r_[True, group[order][1:] != group[order][:-1]]]
    out = np.empty(ngroups, dtype=values.dtype)
    out[group[lead]] = value[lead]
    return out


def _sources(records: _Records, length: np.ndarray, src: np.ndarray, family: np.ndarray,
             inner: np.ndarray, kinds: dict[int, int] | None = None) -> list[Source]:
    """One Source per source name id: its time, the family and the inner name holding most
    of it."""
    named = src >= 0
    if not named.any():
        return []
    kind_of = np.zeros(max(len(records.names), 1), np.int64)
    rec = records.cols
    if len(rec):
        kind_of[rec.name] = rec.kind
    for sid, kind in (kinds or {}).items():
        kind_of[sid] = kind
    rows = np.flatnonzero(named)
    codes, ids = factorize(src[rows])
    ns = length[rows]
    total = group_sum(ns, codes, len(ids))
    fam, inn = (_heaviest(codes, col[rows], ns, len(ids)) for col in (family, inner))
    out = []
    for g in np.argsort(ids, kind="stable").tolist():  # by source name id
        sid, f, i = int(ids[g]), int(fam[g]), int(inn[g])
        inner_text = records.names[i] if i >= 0 and i != sid else None
        out.append(Source(records.names[sid], KINDS[int(kind_of[sid])],
                          FAMILY_NAMES[f] if f >= 0 else None, int(total[g]), inner_text))
    return out


def _samples(data: TraceData, tkey: np.ndarray, s: np.ndarray, e: np.ndarray) -> dict[str, int]:
    """CPU samples (leaf symbol) on each piece's thread inside it: symbol -> count."""
    try:
        smp = data.cpu_samples()
    except Unavailable:
        return {}
    if len(smp) == 0 or len(s) == 0:
        return {}
    names = data.cpu_sample_names()
    counts: dict[str, int] = {}
    for t in np.unique(tkey).tolist():
        sel = tkey == t
        us, ue = intervals.merge(s[sel], e[sel])
        mine = smp.tkey == t
        times = smp.time[mine]
        pos = np.searchsorted(us, times, "right") - 1
        inside = (pos >= 0) & (times < ue[np.maximum(pos, 0)])
        for sym, n in zip(*np.unique(smp.symbol[mine][inside], return_counts=True), strict=True):
            key = scrub(names[int(sym)])
            counts[key] = counts.get(key, 0) + int(n)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def draining_calls(data: TraceData) -> np.ndarray:
    """Per runtime row: a call that waits for the GPU's queue to drain without moving data
    the host asked for: a synchronize (cudaStreamSynchronize, cudaDeviceSynchronize ...) or a
    read-back (analysis/blocking.py). Bulk synchronous copies are not: they move data."""

    def build() -> np.ndarray:
        rt = data.runtime()
        names = data.runtime_api_names()
        out = np.isin(rt.api, [i for i, n in enumerate(names) if n in BLOCKING_APIS])
        rb = find_blocking(data)
        if rb is not None:
            out[rb.call] = True
        return out

    return data.cached("draining_calls", build)


def _drains(data: TraceData, gc, ps: np.ndarray, pt: np.ndarray, skip_names: set[str],  # type: ignore[no-untyped-def]
            window_ns: int) -> tuple[np.ndarray, list[str]]:
    """Per elementary piece: index into the returned labels of the blocking call that was in
    flight on the piece's thread when its gap began and returned before the piece (the call
    drained the GPU's queue: "after aten::item"), else -1."""
    out = np.full(len(ps), -1, np.int64)
    rt = data.runtime()
    if len(ps) == 0 or len(rt) == 0 or len(gc.gap_start) == 0:
        return out, []
    blocking = draining_calls(data)
    gi = np.clip(np.searchsorted(gc.gap_start, ps, "right") - 1, 0, len(gc.gap_start) - 1)
    g0 = gc.gap_start[gi]
    found = np.full(len(ps), -1, np.int64)
    for t in np.unique(pt).tolist():
        rows = np.flatnonzero(blocking & (rt.tkey == t))
        if len(rows) == 0:
            continue
        rows = rows[np.argsort(rt.start[rows], kind="stable")]
        sel = np.flatnonzero(pt == t)
        j = np.searchsorted(rt.start[rows], g0[sel], "right") - 1
        r = rows[np.maximum(j, 0)]
        drained = (j >= 0) & (rt.end[r] >= g0[sel]) & (ps[sel] >= rt.end[r])
        found[sel[drained]] = r[drained]
    calls = np.unique(found[found >= 0])
    if len(calls) == 0:
        return out, []
    region, inner = call_origins(data, calls, skip_names, window_ns)
    names = data.runtime_api_names()
    labels: list[str] = []
    index: dict[str, int] = {}
    code = np.empty(len(calls), np.int64)
    for i, c in enumerate(calls.tolist()):
        what = region[i] or (inner[i] if inner[i] not in skip_names else None) or names[int(rt.api[c])]
        code[i] = index.setdefault(f"after {what}", len(index))
    labels = list(index)
    hit = found >= 0
    out[hit] = code[np.searchsorted(calls, found[hit])]
    return out, labels


def device_sources(data: TraceData, gc, host_side: tuple[int, ...], skip_names: set[str],  # type: ignore[no-untyped-def]
                   window_ns: int) -> DeviceSources:
    """The host sources of one device's host-caused idle time (module docstring)."""
    tkey, s, e = _pieces(data, gc, host_side)
    idle = int((e - s).sum())
    container = max(1, int(CONTAINER_SHARE * window_ns))
    threads = np.unique(tkey)
    srcs: list[Source] = []
    left_t, left_s, left_e = tkey, s, e
    sync = FAMILY_NAMES.index("sync")
    framework = FAMILY_NAMES.index("framework")
    for python in (False, True):
        if len(left_s) == 0:
            break
        records = _records(data, threads, python)
        ps, pe, src, fam, inner, pi = _attribute(records, left_t, left_s, left_e, skip_names, container)
        pt = left_t[pi]
        length = pe - ps
        if not python:
            # Time after a call that drained the GPU's queue, that no more specific family
            # than framework operators holds, is that call's (module docstring).
            drain, labels = _drains(data, gc, ps, pt, skip_names, window_ns)
            take = (drain >= 0) & ((src < 0) | (fam < 0) | (fam == framework))
            if take.any():
                base = len(records.names)
                records = _Records(records.cols, [*records.names, *labels])
                src = np.where(take, base + drain, src)
                fam = np.where(take, sync, fam)
                inner = np.where(take, -1, inner)
                kinds = dict.fromkeys(range(base, base + len(labels)), KINDS.index(CUDA))
                srcs += _sources(records, length[take], src[take], fam[take], inner[take], kinds)
                # filtered one column at a time, each original dropped as its copy is made
                cols = [ps, pe, src, fam, inner, pt, length]
                del ps, pe, src, fam, inner, pt, length
                keep = ~take
                for i in range(len(cols)):
                    cols[i] = cols[i][keep]
                ps, pe, src, fam, inner, pt, length = cols
                del cols
        srcs += _sources(records, length, src, fam, inner)
        none = src < 0
        left_t, left_s, left_e = pt[none], ps[none], pe[none]
    merged: dict[tuple[str, str], Source] = {}
    for x in srcs:
        key = (x.name, x.kind)
        old = merged.get(key)
        merged[key] = x if old is None else Source(x.name, x.kind, old.family or x.family, old.ns + x.ns,
                                                   old.inner or x.inner)
    ordered = sorted(merged.values(), key=lambda x: (-x.ns, x.name))
    families: dict[str, int] = {}
    for x in ordered:
        if x.family is not None:
            families[x.family] = families.get(x.family, 0) + x.ns
    unnamed_ns = idle - sum(x.ns for x in ordered)
    return DeviceSources(gc.device_id, idle, tuple(ordered),
                         dict(sorted(families.items(), key=lambda kv: (-kv[1], kv[0]))), unnamed_ns,
                         _samples(data, left_t, left_s, left_e))


def step_range_names(data: TraceData, step_range: str | None, ranges: Iterable[str]) -> set[str]:
    """The range names that mark steps (the steps metric's `ranges`, the trace's own step
    marks, --step-range): a step range is not what the host was doing, its inside is."""
    out = set(data.step_marks())
    if step_range:
        out.add(step_range)
    return out | set(ranges)


STALL_COPY_BYTES = 4096
STALL_MIN_NS = 1_000_000
H2D = 1
PAGEABLE = 0


def find(data: TraceData) -> Calls | None:
    """The stalls (module docstring) as read-back-like calls: `call` the copy call, `sync` the
    synchronize after it, host blocked from the copy call's start to the synchronize's return.
    None without memcpy records (cached)."""

    def build() -> Calls | None:
        try:
            mc = data.memcpy()
        except Unavailable:
            return None
        rt = data.runtime()
        empty = np.empty(0, np.int64)
        none = Calls(empty, empty, empty, empty, empty.astype(bool), empty.astype(bool), empty, empty, empty)
        tiny = np.flatnonzero((mc.bytes <= STALL_COPY_BYTES) & (mc.copy_kind == H2D) & (mc.src_kind == PAGEABLE))
        if len(tiny) == 0 or len(rt) == 0:
            return none
        call = match_calls(mc.pid[tiny], mc.corr[tiny], rt)
        ok = call >= 0
        tiny, call = tiny[ok], call[ok]
        if len(call) == 0:
            return none
        names = data.runtime_api_names()
        syncing = (sync_kinds(names) == 1) & np.array(["Memcpy" not in n for n in names] or [False])
        order = np.lexsort((rt.start, rt.tkey))
        pos = np.empty(len(rt), dtype=np.int64)
        pos[order] = np.arange(len(rt))
        nxt = order[np.minimum(pos[call] + 1, len(rt) - 1)]
        hit = ((pos[call] + 1 < len(rt)) & (rt.tkey[nxt] == rt.tkey[call]) & syncing[rt.api[nxt]]
               & (rt.start[nxt] - rt.end[call] <= READBACK_GAP_NS) & (rt.end[nxt] - rt.start[call] >= STALL_MIN_NS))
        tiny, call, nxt = tiny[hit], call[hit], nxt[hit]
        n = len(call)
        return Calls(call, tiny, mc.device[tiny], mc.bytes[tiny], np.ones(n, bool), np.ones(n, bool), nxt,
                     rt.start[call], rt.end[nxt])

    return data.cached("layer_syncs", build)


def units(data: TraceData, calls: np.ndarray) -> tuple[list[str | None], list[str | None]]:
    """Per runtime row in `calls`: (the innermost range around it whose name carries an
    instance number, with the numbers replaced: `layer_N`; that range's own name: `layer_7`),
    None where no such range holds it."""
    n = len(calls)
    try:
        nv = data.nvtx()
    except Unavailable:
        return [None] * n, [None] * n
    if len(nv) == 0 or n == 0:
        return [None] * n, [None] * n
    rt = data.runtime()
    tkey = rt.tkey[calls]
    index = cached_range_index(data)
    if index is None:
        nv = nv.take(np.flatnonzero(np.isin(nv.tkey, distinct_few(tkey))))
        index = nvtx.build(nv)
    if len(index.order) == 0:
        return [None] * n, [None] * n
    raw = data.nvtx_names()
    code = nv.name[index.order]
    cache: dict[int, tuple[str, str] | None] = {}

    def instance(c: int) -> tuple[str, str] | None:
        if c not in cache:
            own = normalize(raw[c])
            unit = numbered(own)
            cache[c] = (unit, own) if unit != own else None
        return cache[c]

    found: list[tuple[str, str] | None] = [None] * n
    cur = nvtx.innermost(index, tkey, rt.start[calls], rt.end[calls])
    live = np.flatnonzero(cur >= 0)
    while len(live):
        keep = []
        for i in live.tolist():
            hit = instance(int(code[cur[i]]))
            if hit is not None:
                found[i] = hit
            else:
                keep.append(i)
        live = np.array(keep, dtype=np.int64)
        if len(live):
            cur[live] = index.parent[cur[live]]
            live = live[cur[live] >= 0]
    return [f[0] if f else None for f in found], [f[1] if f else None for f in found]
