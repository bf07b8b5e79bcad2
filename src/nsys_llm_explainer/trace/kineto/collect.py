"""Reading a PyTorch profiler (Kineto) trace: stream the Chrome-trace JSON file one event at a
time (read_trace), and collect the events in one pass into compact per-kind columns
(read_events).

A trace is one JSON object whose `traceEvents` array holds the events; the other top-level
keys (deviceProperties, distributedInfo, baseTimeNanoseconds, version fields) are small.
json.load of a 1 GB trace builds every event as a dict at once (many GB of Python objects),
so the reader decodes the text in chunks with the standard library's C scanner and hands
each event to the caller, which keeps only the fields it needs. Measured on a 1 GB trace
(benchmarks/kineto_synth.py) this reads about 80 MB/s on one core with bounded memory,
which meets the tool's targets without a third-party JSON library (docs/kineto.md).

Floats are kept as their decimal text (parse_float=str): timestamps such as
1700000000123456.789 us do not fit a float64 to the nanosecond, and the caller converts the
text exactly (us_to_ns).

Kineto microsecond timestamps -> integer nanoseconds, exactly.

Kineto writes `ts` and `dur` in microseconds, as integers or as decimals with up to three
fractional digits (nanoseconds). Epoch-based timestamps are about 1.7e15 us: a float64 has
no nanosecond left at that size (1700000000123456.789 reads back as ...456.75), so the
reader keeps each float's decimal text and this module converts the text exactly. The
unit is always microseconds; `displayTimeUnit` only tells viewers how to label the axis.

Collecting: each event is a dict from the JSON reader; only the fields the tables need are kept, in
typed arrays (8 bytes a value) rather than lists of Python ints, so a trace of millions of
events stays within a few hundred MB. Names, processes, threads and shapes are interned
once. What the columns mean is in load.py; the category names in KINDS.

Read a PyTorch profiler trace into collected columns (typed arrays, dicts, lists), and
nothing more."""

from __future__ import annotations

import codecs
import contextlib
import gc
import gzip
import io
import json
import re
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeAlias

from nsys_llm_explainer.errors import InputError

if TYPE_CHECKING:  # the prefetch helper imports this module alone: nothing more at run time
    from nsys_llm_explainer.model import JsonObject

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
    bytes: array = field(default_factory=_i64)  # copies, memsets and runtime calls; -1: not written
    extra: array = field(default_factory=_i64)  # shape id (cpu_op), sync kind name id (cuda_sync)
    # kernels only: their grid and block, as an id into Collected.launch_dims (4 bytes a kernel:
    # a trace has few distinct launch shapes; array("i") raises rather than wraps past 2**31;
    # once read, kept in the smallest type that holds them, as every column is: load._settle)
    dims: array = field(default_factory=lambda: array("i"))
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
    metadata: list[JsonObject]  # the metadata events (ph "M"): process names
    python_ids: array  # per python_function: its "Python id" (-1 none)
    python_parents: array  # per python_function: its "Python parent id" (-1 none)
    bad: Counter[str]  # kind -> events ignored (no time, negative duration)
    shape_values: list[tuple[Any, Any]] = field(default_factory=list)  # per shape id: as written
    thread_proc: list[int] = field(default_factory=list)  # per thread id: its proc id
    # A kernel's grid and block as written: (gx, gy, gz, bx, by, bz) when both are lists of
    # three, else the pair packed (pack_dims) -> id; launch_dims_packed() unpacks them per id
    launch_dims: Interner = field(default_factory=Interner)

    def launch_dims_packed(self) -> tuple[list[int], list[int]]:
        """Per launch_dims id: the grid and the block, packed (pack_dims; -1 not written)."""
        grid: list[int] = []
        block: list[int] = []
        for key in self.launch_dims:
            if len(key) == 6:
                grid.append(pack_dims(list(key[:3])))
                block.append(pack_dims(list(key[3:])))
            else:
                grid.append(key[0])
                block.append(key[1])
        return grid, block

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
        dims_of, dims_id = c.launch_dims.get, c.launch_dims.id
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
                        g = args.get("grid")
                        b = args.get("block")
                        launch = (*g, *b) if type(g) is list and type(b) is list and len(g) == 3 and len(b) == 3 \
                            else (pack(g), pack(b))
                        try:
                            d = dims_of(launch)
                        except TypeError:  # an element that is itself a list or dict: not dims
                            launch = (pack(g), pack(b))
                            d = dims_of(launch)
                        t.dims.append(dims_id(launch) if d is None else d)
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

        def _flow(e: JsonObject, ph: str) -> None:
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


Events: TypeAlias = "tuple[JsonObject, Collected]"  # the top-level keys besides traceEvents, the events


def read_events(path: Path) -> Events:
    """Every event of the trace at `path`, collected; InputError when it is not a trace."""
    collector = Collector()
    top = read_trace(path, collector.add)
    return top, collector.collected


CHUNK_CHARS = 1 << 22  # bytes read and decoded at a time; events are far smaller
SAFE_TAIL = 1 << 20  # the fast loop stops this close to the end of the decoded text
BATCH_CHARS = 1 << 18  # text decoded by one scanner call (whole items only)
BATCH_TRIES = 64  # '}' positions tried when looking for the end of a batch
MAX_VALUE_CHARS = 1 << 26  # a value still cut off after this much text is invalid JSON
GZIP_MAGIC = b"\x1f\x8b"
NOT_A_TRACE = "is not a PyTorch profiler trace"
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(parse_float=str)
# The decoder's C scanner: scan(text, pos) -> (value, end); StopIteration when no value
# starts at pos. Calling it directly skips raw_decode's per-call wrapper.
_SCAN: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]


class _Truncated(Exception):
    """The buffer ended inside a value: read more text."""


class TextStream:
    """Decoded text of the file with a cursor; reads more as the cursor nears the end."""

    def __init__(self, raw: BinaryIO, label: str) -> None:
        self.raw = raw
        self.label = label
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.bytes_read = 0

    def more(self) -> bool:
        """Append the next chunk (dropping consumed text); False at end of file."""
        if self.eof:
            return False
        try:
            data = self.raw.read(CHUNK_CHARS)
        except (EOFError, OSError, zlib.error) as exc:
            raise InputError(f"{self.label}: cannot be read to its end ({_reason(exc)})") from None
        self.bytes_read += len(data)
        text = self.decoder.decode(data, final=not data)
        if not data:
            self.eof = True
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return bool(data) or bool(text)

    def skip_ws(self) -> str:
        """The next non-space character ('' at end of file), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, char: str, what: str) -> None:
        if self.skip_ws() != char:
            raise self.error(f"expected {what}")
        self.pos += 1

    def value(self) -> Any:
        """Decode the JSON value at the cursor (reading more text while it is cut off)."""
        self.skip_ws()
        while True:
            try:
                value, end = _scan(self.buf, self.pos, self.eof)
            except _Truncated:
                if not self.more():
                    raise self.error("the file ends inside a value") from None
                continue
            self.pos = end
            return value

    def error(self, what: str) -> InputError:
        near = self.buf[self.pos : self.pos + 30].replace("\n", " ")
        where = f" near {near!r}" if near else " at the end of the file"
        return InputError(f"{self.label}: {NOT_A_TRACE} (invalid JSON: {what}{where})")


def _scan(text: str, pos: int, eof: bool) -> tuple[Any, int]:
    """One value at text[pos:]; _Truncated when it may continue past the buffer."""
    try:
        value, end = _SCAN(text, pos)
    except StopIteration:  # also raised for a nested value cut off at the end of the text
        if not eof and len(text) - pos < MAX_VALUE_CHARS:
            raise _Truncated from None
        raise json.JSONDecodeError("no JSON value", text, pos) from None
    except json.JSONDecodeError:
        if not eof and len(text) - pos < MAX_VALUE_CHARS:
            raise _Truncated from None
        raise
    if end >= len(text) and not eof and not isinstance(value, dict | list | str):
        raise _Truncated  # a number at the very end may go on in the next chunk
    return value, end


def _reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the compressed data is truncated"
    return str(exc) or type(exc).__name__


def open_binary(path: Path) -> BinaryIO:
    """The file's bytes, decompressed when it is gzip (by content, not by name)."""
    fh = path.open("rb")
    if fh.read(2) == GZIP_MAGIC:
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    fh.seek(0)
    return io.BufferedReader(fh)  # type: ignore[arg-type]


def read_trace(path: Path, on_event: Callable[[Any], None]) -> JsonObject:
    """Call `on_event` for each item of `traceEvents`; return the other top-level keys.

    InputError for anything that is not a JSON object with a traceEvents array."""
    label = str(path)
    try:
        raw = open_binary(path)
    except OSError as exc:
        raise InputError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    with raw, _no_cycle_collection():
        stream = TextStream(raw, label)
        try:
            return _read(stream, on_event)
        except json.JSONDecodeError as exc:
            raise stream.error(exc.msg) from None
        except RecursionError:
            raise stream.error("nested too deeply") from None


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while events are decoded. Decoded JSON holds no
    reference cycles, so every event is freed by reference counting as soon as the
    collector has its fields; but the millions of short-lived dicts trigger collections that
    each walk every object the program holds (pandas, numpy and the templates, once
    imported): a quarter of the read time of a large trace, for nothing to collect."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(stream: TextStream, on_event: Callable[[Any], None]) -> JsonObject:
    first = stream.skip_ws()
    if first == "\ufeff":  # a byte-order mark some writers add
        stream.pos += 1
        first = stream.skip_ws()
    if first != "{":
        kind = "an empty file" if first == "" else "a JSON array" if first == "[" else "not a JSON object"
        raise InputError(f"{stream.label}: {NOT_A_TRACE} ({kind}; expected an object with traceEvents)")
    stream.pos += 1
    top: JsonObject = {}
    found = False
    if stream.skip_ws() == "}":
        stream.pos += 1
    else:
        while True:
            key = stream.value()
            if not isinstance(key, str):
                raise stream.error("expected a key")
            stream.expect(":", "':'")
            if key == "traceEvents" and stream.skip_ws() == "[":
                found = True
                for items in _array_items(stream):
                    for event in items:
                        on_event(event)
            else:
                top[key] = stream.value()
            sep = stream.skip_ws()
            stream.pos += 1
            if sep == "}":
                break
            if sep != ",":
                stream.pos -= 1
                raise stream.error("expected ',' or '}'")
    if stream.skip_ws() != "":
        raise stream.error("extra data after the top-level object")
    if not found:
        raise InputError(
            f"{stream.label}: {NOT_A_TRACE} (a JSON object without a traceEvents array)"
        )
    return top


def _batch_end(buf: str, pos: int, end: int) -> int:
    """Just past the last '}' in buf[pos:end] that is followed by ',' and '{' (whitespace
    aside), i.e. that most likely closes an item of the array; -1 when none is found."""
    ws = _WS.match
    cut = buf.rfind("}", pos, end)
    for _ in range(BATCH_TRIES):
        if cut <= pos:
            break
        m = ws(buf, cut + 1).end()  # type: ignore[union-attr]
        if buf.startswith(",", m) and buf.startswith("{", ws(buf, m + 1).end()):  # type: ignore[union-attr]
            return cut + 1
        cut = buf.rfind("}", pos, cut)
    return -1


def _array_items(stream: TextStream) -> Iterator[list[Any]]:
    """The items of the array at the cursor, in lists.

    Most of the read time is spent per item, so items are decoded a batch at a time: the
    text up to an item boundary (_batch_end) is decoded as one JSON array by one call of
    the C scanner. A boundary guessed wrong (a '},{' inside a string or a nested list)
    makes that text invalid JSON, never a different valid one, so the items of that stretch
    are then decoded one at a time. Near the end of the buffer the stream reads more."""
    stream.pos += 1  # the '['
    if stream.skip_ws() == "]":
        stream.pos += 1
        return
    scan, ws = _SCAN, _WS.match
    while True:
        buf, pos = stream.buf, stream.pos
        safe = len(buf) - SAFE_TAIL if not stream.eof else len(buf)
        single_until = -1  # decode one item at a time up to here (a batch failed)
        try:
            while pos < safe:
                if pos >= single_until:
                    window = min(pos + BATCH_CHARS, safe)
                    end = _batch_end(buf, pos, window)
                    if end > pos:
                        try:
                            items = scan("[" + buf[pos:end] + "]", 0)[0]
                        except (StopIteration, json.JSONDecodeError):
                            single_until = end
                        else:
                            yield items
                            pos = ws(buf, end).end() + 1  # type: ignore[union-attr]  # past the ','
                            continue
                value, pos = scan(buf, ws(buf, pos).end())  # type: ignore[union-attr]
                yield [value]
                pos = ws(buf, pos).end()  # type: ignore[union-attr]
                sep = buf[pos : pos + 1]
                if sep == ",":
                    pos += 1
                    continue
                if sep == "]":
                    stream.pos = pos + 1
                    return
                break  # the stream reports what is wrong, or reads on
        except (StopIteration, json.JSONDecodeError):
            pass  # let the stream decode it, reading more text if it was cut off
        else:
            if pos >= safe and not stream.eof:  # near the end of the text: read on, stay fast
                stream.pos = pos
                stream.more()
                continue
        stream.pos = pos
        if stream.skip_ws() == ",":  # the item ended just before the tail: go on
            stream.pos += 1
            continue
        if stream.skip_ws() == "]":
            stream.pos += 1
            return
        yield [stream.value()]
        sep = stream.skip_ws()
        stream.pos += 1
        if sep == "]":
            return
        if sep != ",":
            stream.pos -= 1
            raise stream.error("expected ',' or ']' in traceEvents")


_THOUSAND = Decimal(1000)
# Real times are at most about 20 characters (1700000000123456.789). Longer text, or a value
# of 10^25 us or more (far beyond the 2^62 ns the reader keeps), is not a time: refusing it
# here keeps the conversion cheap whatever the text holds.
MAX_TEXT = 64
MAX_EXPONENT = 24


class BadTime(ValueError):
    """A ts/dur that is not a finite JSON number."""


def us_to_ns(value: object) -> int:
    """Microseconds (int, or a float's decimal text) -> nanoseconds; sub-ns digits round
    half to even. BadTime for anything else."""
    if type(value) is int:
        return value * 1000
    if type(value) is str:
        if len(value) > MAX_TEXT:
            raise BadTime(f"{value[:30]!r}... is not a time (longer than {MAX_TEXT} characters)")
        # The common case, 123456.789: ASCII digits around the point. The value may be a
        # JSON string, not a number: anything else goes to _exact, which refuses it.
        if value.isascii():
            head, _, frac = value.partition(".")
            if 0 < len(frac) <= 3 and frac.isdigit() and (
                head.isdigit() or (head[:1] == "-" and head[1:].isdigit())
            ):
                return int(head + frac + "000"[len(frac) :])
        return _exact(value)
    if type(value) is float:  # only from callers that parsed floats themselves
        return _exact(repr(value))
    raise BadTime(f"{value!r} is not a number")


def _exact(text: str) -> int:
    if "_" in text or text != text.strip() or not text.isascii():  # Decimal reads these; no JSON number holds them
        raise BadTime(f"{text!r} is not a number")
    try:
        d = Decimal(text)
    except InvalidOperation:
        raise BadTime(f"{text!r} is not a number") from None
    if not d.is_finite():
        raise BadTime(f"{text!r} is not finite")
    if d.adjusted() > MAX_EXPONENT:
        raise BadTime(f"{text!r} is out of range")
    return int((d * _THOUSAND).to_integral_value(rounding=ROUND_HALF_EVEN))
