"""--timeout: a deadline per metric, so one runaway query cannot hold the whole report.

Inside SQLite the deadline is enforced by the connection's progress handler (SQLite calls it
every PROGRESS_STEPS virtual-machine instructions and abandons the statement when it returns
true). Long numpy phases call check() between steps. Either way the metric ends with
MetricTimeout, which the runner turns into Skipped("stopped by --timeout ...").

Metrics may run in several threads over one connection. The handler reads the deadline of
the thread whose statement SQLite is running, and stays installed while any thread is
under a limit: `conn` must be the same object for every limit on one connection. Every
statement on a shared connection holds its statement lock, which set_progress_handler also
takes (NsysExport.sql); a handler changed while another thread's statement runs deadlocks.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from nsys_llm_explainer.errors import MetricTimeout

PROGRESS_STEPS = 10_000  # SQLite VM instructions between deadline checks (a few microseconds)
_deadline: ContextVar[float | None] = ContextVar("nsys_llm_explain_deadline", default=None)
_handlers_lock = threading.Lock()
_handler_users: dict[object, int] = {}  # connection -> limits now active on it


def expired() -> bool:
    end = _deadline.get()
    return end is not None and time.monotonic() > end


def check() -> None:
    """Raise MetricTimeout when the running metric is past its deadline (no-op otherwise)."""
    if expired():
        raise MetricTimeout()


@contextmanager
def limit(conn: sqlite3.Connection | None, seconds: float | None) -> Iterator[None]:
    """Run the body under a deadline of `seconds` (None: no limit). `conn`: the SQLite
    connection the body reads, if any (sources without one rely on check())."""
    if seconds is None:
        yield
        return
    if conn is None:
        token = _deadline.set(time.monotonic() + seconds)
        try:
            yield
        finally:
            _deadline.reset(token)
        return
    token = _deadline.set(time.monotonic() + seconds)
    with _handlers_lock:
        users = _handler_users.get(conn, 0)
        if users == 0:
            conn.set_progress_handler(expired, PROGRESS_STEPS)
        _handler_users[conn] = users + 1
    try:
        yield
    except sqlite3.OperationalError as exc:
        # SQLite reports an abandoned statement as "interrupted".
        if expired() and "interrupt" in str(exc):
            raise MetricTimeout() from None
        raise
    finally:
        with _handlers_lock:
            users = _handler_users.pop(conn) - 1
            if users:
                _handler_users[conn] = users
            else:
                conn.set_progress_handler(None, 0)
        _deadline.reset(token)
