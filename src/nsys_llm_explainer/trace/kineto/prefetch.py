"""Reading a small PyTorch profiler trace in a helper process while this one imports: both
sides of it.

Before the report command opens a trace it imports the analysis (numpy, pandas, the
metrics): about 0.33 s on the 2-core development machine. Reading a trace of a few MB takes
as long, in one core. A helper started first reads and collects the events meanwhile, on
the other core, and sends the collected columns back. Nothing crosses but the path and the
collected columns, pickled, on a pipe: this process's own reader in another process.

On Linux, while this process has one thread (it has started none yet: the helper starts
before numpy and the analysis are imported), the helper is a fork, which has the reader's
modules half imported already. Anywhere else it is a fresh interpreter
(`python -I -S -c`) that imports only this module and the reader: no numpy, no site
packages, no environment. The fork saves that interpreter's start, about 0.04 s of the 0.4 s.

A prefetch is only a shortcut. If it cannot start, fails on the file (a file that is not a
trace, say), or the file changed while it read, the trace is read here as if there were no
prefetch, with the same result and the same errors. Traces of more than MAX_TEXT_BYTES of
JSON are read here: for them the 0.3 s saved is small beside the read, and the helper would
hold a second copy of the columns; so are those under MIN_TEXT_BYTES, read here in less
time than a helper costs. NSYS_LLM_EXPLAIN_NO_PREFETCH=1 turns prefetching off.

The helper's side (serve, main): read and collect the trace's events, write them pickled to
`out`. A forked helper calls serve(); a fresh interpreter runs main(), which
reads the path on stdin and exits 0, or 1 on any failure (the parent then reads the trace
itself and reports what went wrong)."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

from nsys_llm_explainer.trace.kineto.collect import GZIP_MAGIC, Collected, Events, read_events

# JSON text read by a helper at most (the gzip size field for compressed traces): about 2 s
# of reading. The gain is the import time, whatever the size.
MAX_TEXT_BYTES = 200 << 20
# Below this the read takes a few ms here, less than starting a helper and taking its
# result back (a 320 kB trace: 0.579 s with a helper, 0.575 s without, medians of 7).
MIN_TEXT_BYTES = 2 << 20
OFF_VAR = "NSYS_LLM_EXPLAIN_NO_PREFETCH"
FORK = True  # fork where safe (above); False: always a fresh interpreter
WAIT_STEP_S = 0.1
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from nsys_llm_explainer.trace.kineto.prefetch import main; main()"
)


class _Child(Protocol):
    """What a helper process is to this module: subprocess.Popen, or Forked."""

    stdout: IO[bytes] | None

    def poll(self) -> int | None: ...
    def kill(self) -> None: ...
    def wait(self) -> int: ...


@dataclass
class _Prefetch:
    key: tuple[object, ...]
    proc: _Child
    chunks: list[bytes] = field(default_factory=list)
    reader: threading.Thread | None = None
    failed: bool = False  # the reader thread failed: the output is incomplete

    def drain(self) -> None:
        """Read everything the helper writes (in a thread: a full pipe would stop it)."""
        assert self.proc.stdout is not None
        try:
            while chunk := self.proc.stdout.read(1 << 20):
                self.chunks.append(chunk)
        except BaseException:  # noqa: BLE001 - any failure: the trace is read here
            self.failed = True
            self.chunks.clear()

    def close(self) -> None:
        """Stop and reap the helper, end the reader; never raises."""
        try:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
        except OSError:
            pass
        if self.reader is not None:
            self.reader.join(timeout=5)
        if self.proc.stdout is not None:
            try:
                self.proc.stdout.close()
            except OSError:
                pass
        self.chunks.clear()


def one_thread() -> bool:
    """True on Linux when this process has exactly one thread (native ones counted): a fork
    copies the memory, not the other threads, so a lock one of them held would stay held in
    the child."""
    try:
        return sys.platform.startswith("linux") and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class Forked:
    """A forked helper, with the part of subprocess.Popen's interface _Prefetch uses."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None

    # Where the status is lost (SIGCHLD ignored: the system reaps the child itself), the
    # child counts as failed, and the trace is read here.
    LOST = -1

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = self.LOST
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def wait(self) -> int:
        if self.returncode is None:
            try:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            except ChildProcessError:
                self.returncode = self.LOST
        return self.returncode


def fork_call(work: Callable[[IO[bytes]], None]) -> Forked | None:
    """Run work(pipe) in a forked child (exit 0 when it returns, 1 when it raises); None
    when no child could be started. The caller checks one_thread() first. The child ends
    with os._exit: it never returns into the caller's code, runs no exit handlers and
    flushes none of this process's buffers."""
    try:
        r, w = os.pipe()
    except OSError:
        return None
    # Ctrl-C is held back across the fork, so that the child is inside its try before it
    # can see one: it must never unwind into the caller's code.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: never returns into the caller's code
        code = 1
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            os.close(r)
            with os.fdopen(w, "wb") as out:
                work(out)
            code = 0
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, held)
    os.close(w)
    return Forked(pid, os.fdopen(r, "rb"))


def _fork(path: Path) -> Forked | None:
    return fork_call(lambda out: serve(path, out))


def _spawn(path: Path) -> subprocess.Popen[bytes] | None:
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _BOOT, _PACKAGE_ROOT],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError):
        return None
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps({"path": os.fspath(path)}).encode() + b"\n")
        proc.stdin.close()
    except OSError:
        proc.kill()
        proc.wait()
        return None
    return proc


_lock = threading.Lock()
_pending: _Prefetch | None = None


def _identity(path: Path) -> tuple[object, ...] | None:
    """What says the file is the same one: its real path, device, inode, size, mtime."""
    try:
        st = os.stat(path)
        return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        return None


def _text_bytes(path: Path, size: int) -> int | None:
    """The JSON text's length: the file's size, or a gzip file's size field (None when it
    cannot say: it holds the length modulo 4 GiB, so one below the file's size is wrapped)."""
    try:
        with path.open("rb") as fh:
            if fh.read(2) != GZIP_MAGIC:
                return size
            # A gzip of over a quarter of the limit is too large already: its size field,
            # modulo 4 GiB, could hide text far beyond the limit.
            if size < 18 or size > MAX_TEXT_BYTES // 4:
                return None
            fh.seek(-4, os.SEEK_END)
            text = int.from_bytes(fh.read(4), "little")
    except OSError:
        return None
    return text if text >= size else None


def start(path: Path) -> bool:
    """Start reading `path` (a PyTorch profiler trace) in a helper; False when not worth it
    or not possible. take(path) collects the result."""
    global _pending
    if os.environ.get(OFF_VAR, "") not in ("", "0"):
        return False
    key = _identity(path)
    if key is None or not os.path.isfile(path):
        return False
    text = _text_bytes(path, int(key[3]))  # type: ignore[call-overload]
    if text is None or not MIN_TEXT_BYTES <= text <= MAX_TEXT_BYTES:
        return False
    proc: _Child | None = _fork(path) if FORK and one_thread() else _spawn(path)
    if proc is None:
        return False
    job = _Prefetch(key, proc)
    job.reader = threading.Thread(target=job.drain, name="nsys-llm-explain-prefetch", daemon=True)
    try:
        job.reader.start()
    except RuntimeError:  # no thread can start: stop the helper, read here
        job.reader = None
        job.close()
        return False
    with _lock:
        old, _pending = _pending, job
    if old is not None:
        old.close()
    return True


def take(path: Path) -> Events | None:
    """The prefetched events of `path`; None when there are none (read it here)."""
    global _pending
    with _lock:
        job, _pending = _pending, None
    if job is None:
        return None
    try:
        if job.key != _identity(path):
            return None
        assert job.reader is not None
        while job.reader.is_alive():
            job.reader.join(WAIT_STEP_S)
        if job.failed:
            return None  # close() stops a helper that may be blocked on a full pipe
        if job.proc.wait() != 0 or not job.chunks:
            return None
        events = pickle.loads(b"".join(job.chunks))
        if job.key != _identity(path):  # written to while the helper read it
            return None
    except (OSError, ValueError, EOFError, pickle.UnpicklingError):
        return None
    finally:
        job.close()
    if (not isinstance(events, tuple) or len(events) != 2 or not isinstance(events[0], dict)
            or not isinstance(events[1], Collected)):
        return None
    return events


def cancel() -> None:
    """Stop a prefetch nobody took (the command ended before it read the trace)."""
    global _pending
    with _lock:
        job, _pending = _pending, None
    if job is not None:
        job.close()


def serve(path: Path, out: IO[bytes]) -> None:
    data = pickle.dumps(read_events(path), protocol=pickle.HIGHEST_PROTOCOL)
    out.write(data)
    out.flush()


def main() -> None:
    try:
        request = json.loads(sys.stdin.readline())
        serve(Path(str(request["path"])), sys.stdout.buffer)
    except BaseException:  # noqa: BLE001 - any failure: the parent reads the trace itself
        sys.exit(1)

