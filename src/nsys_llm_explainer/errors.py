"""Exit codes and the exceptions that map to them.

Every failure the user can cause ends in one of these, printed as one line with no traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    INTERNAL = 1  # a bug in the tool: the message asks the user to report it
    USAGE = 2  # bad options or option values
    INPUT = 3  # input missing, unreadable, or not a trace this tool reads (nsys SQLite, Kineto JSON)
    OUTPUT = 4  # the output location cannot be written
    GATE = 5  # a --fail-on condition tripped (diff)


class ExplainError(Exception):
    """An error with a one-line message for the user and an exit code."""

    exit_code: ExitCode = ExitCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(ExplainError):
    exit_code = ExitCode.USAGE


class InputError(ExplainError):
    exit_code = ExitCode.INPUT


class OutputError(ExplainError):
    exit_code = ExitCode.OUTPUT


class MetricTimeout(Exception):
    """Raised inside a metric when --timeout interrupts its query."""
