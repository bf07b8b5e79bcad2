"""What the peer drivers (peers_hta_driver.py, peers_nsysai_driver.py) share. Imported from the
drivers' own directory by the peer's interpreter; it needs only the standard library."""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from typing import Any


def error_line(exc: BaseException) -> str:
    """One line: the exception, its first message line, and the file and line it was raised at
    (HTA's assertions carry no message)."""
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" at {os.path.basename(frame.filename)}:{frame.lineno} `{(frame.line or '').strip()}`" if frame else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else "(no message)"
    return f"{type(exc).__name__}: {message}{where}"


def timed(out: dict[str, Any], key: str, fn: Callable[[], Any]) -> Any:
    """fn(), its seconds added to out['seconds'][key]; an exception is recorded in
    out['errors'][key] and gives None (a peer's failure is a result to report)."""
    t0 = time.perf_counter()
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        out["errors"][key] = error_line(exc)
        return None
    finally:
        out["seconds"][key] = round(out["seconds"].get(key, 0.0) + time.perf_counter() - t0, 4)


def dist_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"
