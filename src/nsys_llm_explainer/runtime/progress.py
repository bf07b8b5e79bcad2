"""Progress on stderr for long runs: phase name and rows processed.

Silent unless stderr is a terminal, the run has lasted a couple of seconds, and --quiet
is off, so logs and pipes stay clean.
"""

from __future__ import annotations

import sys
import time

SHOW_AFTER_S = 2.0
MIN_INTERVAL_S = 0.25


class Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.started = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, phase: str, rows: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < SHOW_AFTER_S or now - self.last < MIN_INTERVAL_S:
            return
        self.last = now
        self.shown = True
        sys.stderr.write(f"\r\x1b[Kreading {phase}: {rows:,} rows")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def make_progress(enabled: bool) -> Progress:
    return Progress(enabled)
