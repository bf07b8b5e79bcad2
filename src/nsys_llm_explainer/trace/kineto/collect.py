"""One pass over the events of a Kineto trace into compact per-kind columns.

Each event is a dict from the JSON reader; only the fields the tables need are kept, in
typed arrays (8 bytes a value) rather than lists of Python ints, so a trace of millions of
events stays within a few hundred MB. Names, processes, threads and shapes are interned
once. What the columns mean is in load.py; the category names in KINDS.

Read a PyTorch profiler trace into collected columns (typed arrays, dicts, lists), and
nothing more."""

from __future__ import annotations

import json
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nsys_llm_explainer.trace.kineto.read import BadTime, read_trace, us_to_ns

# Event category -> table. Old traces (PyTorch <= 1.9) capitalize the categories; ROCm traces
# reuse the CUDA names for HIP calls and kernels.
KERNEL, RUNTIME, USER, GPU_USER, OP, MEMCPY, MEMSET, SYNC, PYTHON = range(9)
KINDS: dict[str, int] = {
    "kernel": KERNEL, "Kernel": KERNEL,
    "cuda_runtime": RUNTIME, "cuda_driver": RUNTIME, "Runtime": RUNTIME, "Driver": RUNTIME,
    "user_annotation": USER, "User annotation": USER,
    "gpu_user_annotation": GPU_USER,
    "cpu_op": OP, "Operator": OP,
    "gpu_memcpy": MEMCPY, "Memcpy": MEMCPY,
    "gpu_memset": MEMSET, "Memset": MEMSET,
    "cuda_sync": SYNC,
    "python_function": PYTHON,
}
KIND_NAMES = ("kernel", "runtime", "user_annotation", "gpu_user_annotation", "cpu_op",
              "gpu_memcpy", "gpu_memset", "cuda_sync", "python_function")
GPU_KINDS = frozenset({KERNEL, GPU_USER, MEMCPY, MEMSET, SYNC})
FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu"})
NONE = -1
# Times (ns) at or beyond this are not read: sums of such values could overflow int64.
MAX_NS = 1 << 62


def _i64() -> array:
    return array("q")


@dataclass
class Table:
    """Columns of one kind: times in ns, interned ids, and the kind's own fields."""

    start: array = field(default_factory=_i64)
    dur: array = field(default_factory=_i64)
    name: array = field(default_factory=_i64)
    proc: array = field(default_factory=_i64)  # interned pid value
    thread: array = field(default_factory=_i64)  # interned (pid, tid) value
    corr: array = field(default_factory=_i64)
    ext: array = field(default_factory=_i64)  # External id
    device: array = field(default_factory=_i64)
    stream: array = field(default_factory=_i64)
    bytes: array = field(default_factory=_i64)  # copies, memsets and runtime calls; -1: not written;
    # kernels: their grid, packed (pack_dims)
    extra: array = field(default_factory=_i64)  # shape id (cpu_op), sync kind name id (cuda_sync), block (kernel)
    concrete: array = field(default_factory=_i64)  # Concrete Inputs id (cpu_op only)
    # cuda_sync only: the stream a "Stream Wait Event" waits on and the correlation id of
    # the event's record call (wait_on_stream, wait_on_cuda_event_record_corr_id); -1: none
    wait_stream: array = field(default_factory=_i64)
    record_corr: array = field(default_factory=_i64)

    def __len__(self) -> int:
        return len(self.start)


class Interner(dict[Any, int]):
    """value -> dense id, first seen first."""

    def id(self, value: Any) -> int:
        i = self.get(value)
        if i is None:
            i = self[value] = len(self)
        return i

    def values_list(self) -> list[Any]:
        return list(self)


def pack_dims(value: Any) -> int:
    """A kernel's grid or block ([x, y, z] in its args) as one int: x + y << 31 + z << 47
    (CUDA allows x < 2^31, y and z < 2^16); -1 when not written as three such ints."""
    if type(value) is list and len(value) == 3:
        x, y, z = value
        if type(x) is int and type(y) is int and type(z) is int and 0 <= x < 1 << 31 and 0 <= y < 1 << 16 \
                and 0 <= z < 1 << 16:
            return x | y << 31 | z << 47
    return NONE


def unpack_dims(packed: int) -> tuple[int, int, int] | None:
    return None if packed < 0 else (packed & ((1 << 31) - 1), packed >> 31 & 0xFFFF, packed >> 47 & 0xFFFF)


def _int(value: Any) -> int:
    """An id or count from args: ints as they are, numeric text parsed, anything else -1.
    Text of more digits than 64 bits hold raises OverflowError, as appending such an int does."""
    if type(value) is int:
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            if len(text) > 20:
                raise OverflowError(f"{text[:30]}... does not fit 64 bits")
            return int(text)
        digits = "".join(ch for ch in text if ch.isdigit())  # "stream 7" -> 7
        return int(digits) if digits and len(digits) < 19 else NONE
    return NONE


@dataclass
class Flows:
    """ac2g flow events of one side: flow id, interned thread of the event it binds to
    (which also names its process), and its timestamp in ns."""

    id: array = field(default_factory=_i64)
    thread: array = field(default_factory=_i64)
    ts: array = field(default_factory=_i64)

    def __len__(self) -> int:
        return len(self.id)


@dataclass
class Collected:
    tables: list[Table]
    names: Interner  # event names of every kind
    procs: Interner  # pid values as written (int or str)
    threads: Interner  # (pid id, tid value)
    shapes: Interner  # repr of (Input Dims, Input type) as written -> id (see shape_texts)
    concrete: Interner  # Concrete Inputs as a tuple of printed values (or JSON text)
    flow_starts: Flows  # ph "s": at the runtime call
    flow_ends: Flows  # ph "f": at the GPU event
    categories: Counter[str]
    metadata: list[dict[str, Any]]
    python_ids: array  # per python_function: its "Python id" (-1 none)
    python_parents: array  # per python_function: its "Python parent id" (-1 none)
    bad: Counter[str]  # kind -> events ignored (no time, negative duration)
    shape_values: list[tuple[Any, Any]] = field(default_factory=list)  # per shape id: as written
    thread_proc: list[int] = field(default_factory=list)  # per thread id: its proc id

    def shape_texts(self) -> list[tuple[str, str]]:
        """Per shape id: (Input Dims, Input type) as compact JSON text. Keyed per event by a
        cheap repr and turned into JSON once per distinct shape."""
        return [(_text(d), _text(t)) for d, t in self.shape_values]

    def table(self, kind: int) -> Table:
        return self.tables[kind]


class Collector:
    """Feed events with `add`; read the result from `collected`."""

    def __init__(self) -> None:
        self.collected = Collected(
            tables=[Table() for _ in KIND_NAMES], names=Interner(), procs=Interner(),
            threads=Interner(), shapes=Interner(), concrete=Interner(), flow_starts=Flows(),
            flow_ends=Flows(), categories=Counter(), metadata=[], python_ids=_i64(),
            python_parents=_i64(), bad=Counter(),
        )
        self.add = self._make_add()

    def _make_add(self) -> Any:  # noqa: C901 - the hot loop, kept in one frame for speed
        c = self.collected
        tables, kinds, categories = c.tables, KINDS, c.categories
        names, procs, threads, shapes, concrete = c.names, c.procs, c.threads, c.shapes, c.concrete
        flow_s, flow_e, bad = c.flow_starts, c.flow_ends, c.bad
        py_ids, py_parents = c.python_ids, c.python_parents
        shape_values, thread_proc = c.shape_values, c.thread_proc
        gpu_kinds = GPU_KINDS
        pack = pack_dims
        to_ns = us_to_ns
        name_of = names.get  # an interned name's id (names.id for a new one)
        # (pid, tid) as written -> (proc id, thread id): one lookup per event.
        seen: dict[tuple[Any, Any], tuple[int, int]] = {}

        def thread_of(pid: Any, tid: Any) -> tuple[int, int]:
            key = (_hashable(pid), _hashable(tid))
            pt = seen.get(key)
            if pt is None:
                p = procs.id(key[0])
                th = threads.id((p, key[1]))
                if th == len(thread_proc):
                    thread_proc.append(p)
                pt = seen[key] = (p, th)
            return pt

        def add(e: Any) -> None:
            if type(e) is not dict:
                categories["(not an object)"] += 1
                return
            ph = e.get("ph")
            cat = e.get("cat")
            if ph != "X":
                if ph in ("s", "f") and cat in FLOW_CATEGORIES:
                    _flow(e, ph)
                elif ph == "M":
                    c.metadata.append(e)
                categories[cat if type(cat) is str else f"(ph {ph})"] += 1
                return
            categories[cat if type(cat) is str else "(no category)"] += 1
            kind = kinds.get(cat) if type(cat) is str else None
            if kind is None:
                return
            try:
                ts = e["ts"]
                start = ts * 1000 if type(ts) is int else to_ns(ts)
                dur = e.get("dur", 0)
                dur = dur * 1000 if type(dur) is int else to_ns(dur)
            except (KeyError, BadTime):
                bad[KIND_NAMES[kind]] += 1
                return
            if not (0 <= dur < MAX_NS and -MAX_NS < start < MAX_NS):
                bad[KIND_NAMES[kind]] += 1
                return
            t = tables[kind]
            # An id or size beyond 64 bits fails its append: the event is left out whole.
            try:
                args = e.get("args")
                if type(args) is not dict:
                    args = {}
                name = e.get("name")
                pid = e.get("pid")
                tid = e.get("tid")
                try:
                    p, th = seen[(pid, tid)]
                except (KeyError, TypeError):  # first event of this thread, or a pid/tid that is a list
                    p, th = thread_of(pid, tid)
                t.start.append(start)
                t.dur.append(dur)
                if type(name) is not str:
                    name = ""
                nid = name_of(name)
                t.name.append(names.id(name) if nid is None else nid)
                t.proc.append(p)
                t.thread.append(th)
                corr = args.get("correlation", NONE)
                t.corr.append(corr if type(corr) is int else _int(corr))
                ext = args.get("External id")
                if ext is None:
                    ext = args.get("external id", NONE)
                t.ext.append(ext if type(ext) is int else _int(ext))
                if kind in gpu_kinds:
                    dev = args.get("device")
                    t.device.append(dev if type(dev) is int else _int(pid if dev is None else dev))
                    stream = args.get("stream")
                    t.stream.append(stream if type(stream) is int else _int(tid if stream is None else stream))
                    if kind == KERNEL:
                        t.bytes.append(pack(args.get("grid")))
                        t.extra.append(pack(args.get("block")))
                    elif kind == MEMCPY or kind == MEMSET:
                        size = args.get("bytes", NONE)
                        t.bytes.append(size if type(size) is int else _int(size))
                    elif kind == SYNC:
                        sk = args.get("cuda_sync_kind")
                        t.extra.append(names.id(sk if type(sk) is str else name if type(name) is str else ""))
                        ws = args.get("wait_on_stream", NONE)
                        t.wait_stream.append(ws if type(ws) is int else _int(ws))
                        rc = args.get("wait_on_cuda_event_record_corr_id", NONE)
                        t.record_corr.append(rc if type(rc) is int else _int(rc))
                elif kind == RUNTIME:
                    size = args.get("bytes")
                    if size is None:
                        size = args.get("size", NONE)  # ROCm copy and memset calls
                    t.bytes.append(size if type(size) is int else _int(size))
                elif kind == OP:
                    dims = args.get("Input Dims")
                    if dims is None:
                        t.extra.append(NONE)
                    else:
                        types = args.get("Input type")
                        key = repr((dims, types))
                        sid = shapes.get(key)
                        if sid is None:
                            sid = shapes.id(key)
                            shape_values.append((dims, types))
                        t.extra.append(sid)
                    values = args.get("Concrete Inputs")
                    t.concrete.append(NONE if values is None else concrete.id(_values_key(values)))
                elif kind == PYTHON:
                    py_ids.append(_int(args.get("Python id")))
                    py_parents.append(_int(args.get("Python parent id")))
            except OverflowError:
                _drop_row(t, kind, len(t.start) - 1)  # start, appended first, always fits
                bad[KIND_NAMES[kind]] += 1

        def _drop_row(t: Table, kind: int, row: int) -> None:
            """Remove what a failed event appended at `row` (start always is appended first)."""
            for a in (t.start, t.dur, t.name, t.proc, t.thread, t.corr, t.ext, t.device, t.stream,
                      t.bytes, t.extra, t.concrete, t.wait_stream, t.record_corr):
                del a[row:]
            if kind == PYTHON:
                del py_ids[row:], py_parents[row:]

        def _flow(e: dict[str, Any], ph: str) -> None:
            fid = e.get("id")
            ts = e.get("ts")
            try:
                ns = ts * 1000 if type(ts) is int else to_ns(ts)
            except BadTime:
                return
            try:
                fid = fid if type(fid) is int else _int(fid)
            except OverflowError:
                return
            if not (-MAX_NS < ns < MAX_NS and -MAX_NS < fid < MAX_NS):
                return
            pid = e.get("pid")
            tid = e.get("tid")
            try:
                th = seen[(pid, tid)][1]
            except (KeyError, TypeError):
                th = thread_of(pid, tid)[1]
            side = flow_s if ph == "s" else flow_e
            side.id.append(fid)
            side.thread.append(th)
            side.ts.append(ns)

        return add


def _hashable(value: Any) -> Any:
    """pid/tid as a dict key: ints and text as they are, anything else (a list ...) as text."""
    return value if type(value) in (int, str) or value is None else repr(value)


def _values_key(value: Any) -> Any:
    """Concrete Inputs as a hashable key: a list of printed values as a tuple (cheaper than
    JSON text per event), anything else as JSON text."""
    if type(value) is list:
        key = tuple(value)
        try:
            hash(key)
            return key
        except TypeError:
            pass
    return _text(value)


def _text(value: Any) -> str:
    """Compact JSON text of a shapes/types list ("" when absent; floats stay text)."""
    if value is None:
        return ""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return ""


Events = tuple[dict[str, Any], Collected]  # the top-level keys besides traceEvents, the events


def read_events(path: Path) -> Events:
    """Every event of the trace at `path`, collected; InputError when it is not a trace."""
    collector = Collector()
    top = read_trace(path, collector.add)
    return top, collector.collected
