"""Stream a PyTorch profiler (Kineto) Chrome-trace JSON file, one event at a time.

A trace is one JSON object whose `traceEvents` array holds the events; the other top-level
keys (deviceProperties, distributedInfo, baseTimeNanoseconds, version fields) are small.
json.load of a 1 GB trace builds every event as a dict at once (many GB of Python objects),
so the reader decodes the text in chunks with the standard library's C scanner and hands
each event to the caller, which keeps only the fields it needs. Measured on a 1 GB trace
(benchmarks/kineto_synth.py) this reads about 80 MB/s on one core with bounded memory,
which meets the tool's targets without a third-party JSON library (docs/kineto.md).

Floats are kept as their decimal text (parse_float=str): timestamps such as
1700000000123456.789 us do not fit a float64 to the nanosecond, and the caller converts the
text exactly (trace/kineto/read.py).

Kineto microsecond timestamps -> integer nanoseconds, exactly.

Kineto writes `ts` and `dur` in microseconds, as integers or as decimals with up to three
fractional digits (nanoseconds). Epoch-based timestamps are about 1.7e15 us: a float64 has
no nanosecond left at that size (1700000000123456.789 reads back as ...456.75), so the
reader keeps each float's decimal text and this module converts the text exactly. The
unit is always microseconds; `displayTimeUnit` only tells viewers how to label the axis."""

from __future__ import annotations

import codecs
import contextlib
import gc
import gzip
import io
import json
import re
import zlib
from collections.abc import Callable, Iterator
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, BinaryIO

from nsys_llm_explainer.errors import InputError

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


def read_trace(path: Path, on_event: Callable[[Any], None]) -> dict[str, Any]:
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


def _read(stream: TextStream, on_event: Callable[[Any], None]) -> dict[str, Any]:
    first = stream.skip_ws()
    if first == "\ufeff":  # a byte-order mark some writers add
        stream.pos += 1
        first = stream.skip_ws()
    if first != "{":
        kind = "an empty file" if first == "" else "a JSON array" if first == "[" else "not a JSON object"
        raise InputError(f"{stream.label}: {NOT_A_TRACE} ({kind}; expected an object with traceEvents)")
    stream.pos += 1
    top: dict[str, Any] = {}
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
