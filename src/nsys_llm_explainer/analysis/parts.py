"""Independent parts of one build (say, one per device), shared with idle metric threads.

On a big trace the metrics run in threads (runtime/runner.py), and one long metric can
leave the other threads with nothing they may start. A build whose parts share nothing
but the cache (TraceData.cached builds each key once) offers its parts to them
(TraceData.parts); the calling thread takes the parts nobody took, in order. So a part
runs beside others only where a thread would otherwise wait, and the memory peak does not
grow by a third thread's. Where the run has one thread (a small trace, --jobs 1), the parts
run one after another. The results come back in the order of the parts.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

from nsys_llm_explainer.trace.data import TraceData

T = TypeVar("T")
R = TypeVar("R")


def each(fn: Callable[[T], R], parts: Sequence[T], data: TraceData) -> list[R]:
    """[fn(p) for p in parts]. Each part runs in a copy of the caller's context, so the
    metric's --timeout deadline (trace/deadline.py) holds in whichever thread runs it."""
    n = len(parts)
    if data.threads < 2 or n < 2:
        return [fn(p) for p in parts]
    results: list[R | None] = [None] * n
    errors: list[BaseException | None] = [None] * n
    done = [threading.Event() for _ in parts]
    claimed = [False] * n
    lock = threading.Lock()

    def run(i: int, context: contextvars.Context) -> None:
        with lock:
            if claimed[i]:
                return
            claimed[i] = True
        if any(e is not None for e in errors):  # a part failed: the build fails, skip the rest
            done[i].set()
            return
        try:
            results[i] = context.run(fn, parts[i])
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
            errors[i] = exc
        finally:
            done[i].set()

    offered: list[Callable[[], None]] = []
    for i in range(1, n):
        context = contextvars.copy_context()
        offered.append(lambda i=i, context=context: run(i, context))  # type: ignore[misc]
        data.parts.offer(offered[-1])
    for i in range(n):
        run(i, contextvars.copy_context())
    data.parts.withdraw(offered)  # every part is claimed: what is left on offer is stale
    del offered
    for event in done:
        event.wait()
    for exc in errors:
        if exc is not None:
            raise exc
    return results  # type: ignore[return-value]
