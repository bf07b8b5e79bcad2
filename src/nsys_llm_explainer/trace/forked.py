"""A function run in a forked copy of this process, its output read back over a pipe.

A fork starts in a millisecond with everything this process has imported and built, which
a fresh interpreter would import or rebuild. It is only safe while this process has one
thread (a fork copies the memory, not the other threads, so a lock one of them held stays
held in the child): one_thread() says so on Linux, and callers fork only then. The child
runs the function with the pipe's write end, then ends with os._exit: it never returns into
the caller's code, runs no exit handlers and flushes none of the parent's buffers.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import IO


def one_thread() -> bool:
    """True on Linux when this process has exactly one thread (native ones counted)."""
    try:
        return sys.platform.startswith("linux") and len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


class Forked:
    """A forked child, with the part of subprocess.Popen's interface callers use."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None

    # Where the status is lost (SIGCHLD ignored: the system reaps the child itself), the
    # child counts as failed, and the caller does the work itself.
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

    def close(self) -> None:
        """Stop the child if it still runs, reap it and close the pipe; never raises."""
        if self.poll() is None:
            self.kill()
        self.wait()
        if self.stdout is not None:
            try:
                self.stdout.close()
            except OSError:
                pass


def fork_call(work: Callable[[IO[bytes]], None]) -> Forked | None:
    """Run work(pipe) in a forked child (exit 0 when it returns, 1 when it raises); None
    when no child could be started. The caller checks one_thread() first."""
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
