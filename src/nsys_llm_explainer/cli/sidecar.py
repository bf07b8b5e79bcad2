"""A second process for one command-line report, so that a small trace uses two cores.

A small report is work that one core does step after step: importing pandas, numpy and the
templates (about 0.3 s), reading a PyTorch profiler trace (pure Python, about 0.15 s per
10 MB of JSON), running the metrics, rendering the files. The sidecar is forked when
`explain` starts, while this process holds only the command line (no native threads yet,
so a fork is safe), and takes two of those steps off this process:

1. it reads a PyTorch profiler trace into columns (trace/kineto/events.py) while this
   process imports the analysis; the columns come back pickled;
2. when the report is made, it renders the formats in SIDECAR_FORMATS (CSV tables,
   report.json, the Nsight Compute plan) while this process renders report.md and
   report.html; the texts come back, and this process writes every file.

The sidecar is only a shortcut. It writes no file and prints nothing; whatever it fails to
do (it cannot start, dies, or something cannot be pickled) is done here, with the same
result. It stops when this process closes its pipe or exits. --jobs 1 runs without it.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from nsys_llm_explainer.render import Format

# The formats the sidecar renders: the ones that share nothing with report.md/report.html
# (those two share the plots and the metric sections, so they are rendered together here).
SIDECAR_FORMATS = (Format.CSV, Format.JSON, Format.NCU)
# A trace bigger than this (its JSON text) is read here: the columns would exist twice for a
# while, and the import time saved is small beside its read time.
PREFETCH_MAX_BYTES = 256 << 20


class Sidecar:
    """This process's end of the two pipes to the forked sidecar."""

    def __init__(self, pid: int, to_child: BinaryIO, from_child: BinaryIO, reading: bool) -> None:
        self.pid = pid
        self._to = to_child
        self._from = from_child
        self.reading = reading  # the sidecar is reading the trace; kineto_events() waits for it

    def kineto_events(self) -> Any:
        """The events of the PyTorch profiler trace the sidecar read (trace/kineto/events.py);
        None: read them here. Raises the InputError the trace gave the sidecar."""
        if not self.reading:
            return None
        self.reading = False
        message = self._receive()
        if not isinstance(message, tuple) or message[0] not in ("events", "input-error"):
            return None
        if message[0] == "input-error":
            from nsys_llm_explainer.errors import InputError

            raise InputError(message[1])
        return message[1]

    def prepare(self, formats: tuple[Format, ...], md: str = "compact") -> None:
        """Get ready to render this process's share of `formats` (while the sidecar reads)."""
        from nsys_llm_explainer.render.files import prepare

        prepare(tuple(f for f in formats if f not in SIDECAR_FORMATS), md)

    def build(self, report: Any, formats: tuple[Format, ...], md: str) -> dict[str, str]:
        """files.build(report, formats, md), the SIDECAR_FORMATS rendered by the sidecar."""
        from nsys_llm_explainer.render.files import build

        theirs = tuple(f for f in formats if f in SIDECAR_FORMATS)
        sending = self._send_later(("build", report, theirs, md)) if theirs and not self.reading else None
        files = build(report, tuple(f for f in formats if sending is None or f not in theirs), md=md)
        if sending is not None:
            sending.join()
            message = self._receive() if sending.sent else None
            if isinstance(message, tuple) and message[0] == "files":
                files.update(message[1])
            else:  # the sidecar could not render them: render them here
                files.update(build(report, theirs, md=md))
        return files

    def _send_later(self, message: Any) -> _Sending | None:
        """Pickle `message` now and write it from a thread (the sidecar may still be importing
        what it needs; this process goes on meanwhile); None when it does not pickle."""
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - something the report holds does not pickle
            return None
        sending = _Sending(self._to, data)
        sending.start()
        return sending

    def _receive(self) -> Any:
        try:
            return pickle.load(self._from)
        except Exception:  # noqa: BLE001 - the sidecar died or sent something unreadable
            return None

    def close(self) -> None:
        """Stop the sidecar (it ends when its pipe closes; kill it if it is still busy)."""
        for pipe in (self._to, self._from):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        except (ChildProcessError, ProcessLookupError):
            pass


class _Sending(threading.Thread):
    def __init__(self, pipe: BinaryIO, data: bytes) -> None:
        super().__init__(name="sidecar-send", daemon=True)
        self.pipe, self.data, self.sent = pipe, data, False

    def run(self) -> None:
        try:
            self.pipe.write(self.data)
            self.pipe.flush()
            self.sent = True
        except (OSError, ValueError):  # the sidecar is gone (or its pipe closed)
            pass


@contextmanager
def started(trace: Path, jobs: int | None, formats: tuple[Format, ...]) -> Iterator[Sidecar | None]:
    """A sidecar for the report of `trace` in `formats` (None where it cannot help or cannot
    start); stopped on leaving the block, however it is left."""
    sidecar = start(trace, jobs, formats)
    try:
        yield sidecar
    finally:
        if sidecar is not None:
            sidecar.close()


def start(trace: Path, jobs: int | None, formats: tuple[Format, ...]) -> Sidecar | None:
    if not os.path.isfile(trace) or not _can_fork(jobs):
        return None
    read = _prefetch(trace)
    renders = any(f in SIDECAR_FORMATS for f in formats)  # else it only reads, if that
    if not read and not renders:
        return None
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    # Ctrl-C is held back over the fork: the sidecar ignores it from its first instruction,
    # and this process gets it once the sidecar is recorded, to be stopped by close().
    masked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        pid = os.fork()
        if pid == 0:  # the sidecar; never returns
            try:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.pthread_sigmask(signal.SIG_SETMASK, masked)
                os.close(to_child_w)
                os.close(from_child_r)
                _serve(to_child_r, from_child_w, trace if read else None, renders)
            finally:
                os._exit(0)
        sidecar = Sidecar(pid, os.fdopen(to_child_w, "wb"), os.fdopen(from_child_r, "rb"), read)
        os.close(to_child_r)
        os.close(from_child_w)
        return sidecar
    except OSError:  # no fork: everything is done here
        for fd in (to_child_r, to_child_w, from_child_r, from_child_w):
            try:
                os.close(fd)
            except OSError:
                pass
        return None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, masked)


def _can_fork(jobs: int | None) -> bool:
    """Fork only on Linux (macOS frameworks are not fork-safe), only while this process has
    one thread (native ones too: numpy's BLAS starts a pool when imported), and only where
    two processes may run (--jobs, CPUs)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    if _threads() != 1:
        return False
    if jobs is None:
        from nsys_llm_explainer.runtime.cpus import default_jobs

        jobs = default_jobs()
    return jobs > 1


def _threads() -> int:
    """This process's threads, as the kernel counts them (0: unknown)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _prefetch(trace: Path) -> bool:
    """Read `trace` in the sidecar: a PyTorch profiler trace of at most PREFETCH_MAX_BYTES."""
    from nsys_llm_explainer.trace.sniff import KINETO, sniff

    try:
        return sniff(trace) == KINETO and _small_text(trace)
    except OSError:
        return False


def _small_text(path: Path) -> bool:
    """The file's text is at most PREFETCH_MAX_BYTES. A gzip file records its text's size
    (modulo 4 GiB, and only of its last member), so the compressed size is held to a quarter
    of the limit too, and the record must not be below it."""
    from nsys_llm_explainer.trace.nsys.open import GZIP_MAGIC

    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if fh.read(2) != GZIP_MAGIC:
            return size <= PREFETCH_MAX_BYTES
        fh.seek(-4, os.SEEK_END)
        text = int.from_bytes(fh.read(4), "little")
    return size <= PREFETCH_MAX_BYTES // 4 and size <= text <= PREFETCH_MAX_BYTES


def _serve(requests_fd: int, replies_fd: int, trace: Path | None, renders: bool) -> None:
    """The sidecar: read the trace if asked, then render what is sent (if anything will be)."""
    try:
        with os.fdopen(requests_fd, "rb") as requests, os.fdopen(replies_fd, "wb") as replies:
            if trace is not None:  # streamed: the parent unpickles while this pickles
                pickle.dump(_read(trace), replies, protocol=pickle.HIGHEST_PROTOCOL)
                replies.flush()
            if not renders:
                return
            # Import the renderers while the parent runs the metrics.
            from nsys_llm_explainer.render import csv_writer, files, json_writer  # noqa: F401

            _, report, formats, md = pickle.load(requests)
            pickle.dump(("files", files.build(report, formats, md=md)), replies, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # noqa: BLE001, S110 - the parent does whatever the sidecar did not
        pass


def _read(trace: Path) -> tuple[str, Any]:
    from nsys_llm_explainer.errors import InputError
    from nsys_llm_explainer.trace.kineto.events import read_events

    try:
        return ("events", read_events(trace))
    except InputError as exc:
        return ("input-error", exc.message)
    except Exception:  # noqa: BLE001 - the parent reads it again and reports it
        return ("failed", None)
