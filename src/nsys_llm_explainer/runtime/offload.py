"""One metric's cached build computed in a forked copy of this process, while this process
runs the other metrics.

On a small trace the metrics run one after another in one thread (runner.plan), and the
critical path's analysis (the step graph, its replays and paths: metrics/critical_path.py)
is the longest of them: 0.16 s of the 0.43 s of metrics on hta_a100_80gb_rank0. Its inputs
are ready once the metrics it reads have finished (Metric.after), so the runner forks then:
the child builds the value (Metric.prebuild) and sends it back pickled, with the warnings
the build added, while this process runs the metrics that do not depend on it; the metric
itself runs last and finds the value in the cache.

Only where a fork is safe and cheap (forked.one_thread(): metrics in one thread, no
database connection to share: PyTorch profiler traces) and without --timeout (a deadline
belongs to the metric that runs here). Anything that goes wrong in the child (an exception,
a signal, a value that does not come back) leaves the cache as it was: the metric builds the
value here as if there had been no child, with the same result.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from nsys_llm_explainer.trace import forked

if TYPE_CHECKING:  # the command line imports this module before the analysis
    from nsys_llm_explainer.analysis.context import Context

Build = Callable[["Context"], Any]
OFF_VAR = "NSYS_LLM_EXPLAIN_NO_OFFLOAD"
# Only the command line forks: a library caller's process is not this program's to copy.
_allowed = False


def allow() -> None:
    """Let explain() offload in this process (the command line calls it)."""
    global _allowed
    _allowed = True


# A fork shares the memory until either side writes to it, and reading Python objects
# writes their reference counts: the child may come to hold a copy of much of this
# process. Above this resident size the build stays here.
MAX_RSS_BYTES = 512 << 20


# Below this many kernels the build is too short to pay for the fork and the pickled value
# (farm-bench, 7 runs each: 1,465 kernels, a 0.03 s build: wall A/B 1.023; 6,080 kernels, a
# 0.16 s build: 0.927).
MIN_KERNELS = 4_000


def wanted(data: Any, jobs: int, threads: int, timeout_s: float | None, kernels: int) -> bool:
    """Whether a run may offload: the command line, more than one job, metrics in one
    thread, no --timeout, data a fork can share (no database connection), enough kernels
    for the build to be long, a small process."""
    return (_allowed and jobs > 1 and threads == 1 and timeout_s is None and bool(getattr(data, "forkable", False))
            and kernels >= MIN_KERNELS and os.environ.get(OFF_VAR, "") in ("", "0")
            and _resident_bytes() <= MAX_RSS_BYTES)


def _resident_bytes() -> int:
    """This process's resident memory (Linux; where unknown, more than MAX_RSS_BYTES)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return MAX_RSS_BYTES + 1


class Offload:
    """`build(ctx)` for cache key `key`, running in a forked child from construction."""

    def __init__(self, ctx: Context, key: str, build: Build) -> None:
        self.ctx = ctx
        self.key = key
        data = ctx.data

        def work(out: IO[bytes]) -> None:
            warned, counted = len(data.warnings), set(data.row_counts)
            value = build(ctx)
            new_counts = {t: n for t, n in data.row_counts.items() if t not in counted}
            pickle.dump((value, data.warnings[warned:], new_counts), out, protocol=pickle.HIGHEST_PROTOCOL)

        self.child = forked.fork_call(work)

    def finish(self) -> bool:
        """Wait for the child and put its value in the cache; False when it failed (the
        metric then builds the value itself)."""
        child, self.child = self.child, None
        if child is None or child.stdout is None:
            return False
        try:
            payload = child.stdout.read()
            if child.wait() != 0 or not payload:
                return False
            value, warnings, counts = pickle.loads(payload)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError, TypeError):
            return False
        finally:
            child.close()
        data = self.ctx.data
        data.warnings.extend(str(w) for w in warnings)
        for table, rows in counts.items():
            data.row_counts.setdefault(str(table), int(rows))
        data.put(self.key, value)
        return True

    def cancel(self) -> None:
        child, self.child = self.child, None
        if child is not None:
            child.close()
