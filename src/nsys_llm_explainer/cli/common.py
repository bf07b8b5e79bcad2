"""What every command shares: the typer app settings, the exit codes' help, the choice
options, and the one path by which any failure becomes one line on stderr and its
documented exit code."""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.errors import ExitCode, ExplainError, UsageError
from nsys_llm_explainer.render import Format

DEBUG_VAR = "NSYS_LLM_EXPLAIN_DEBUG"  # set: internal errors print their traceback
EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 internal error (please report it); 2 usage error; "
    "3 input missing, unreadable or not a trace this tool reads (an Nsight Systems SQLite export "
    "or a PyTorch profiler JSON trace); "
    "4 output cannot be written; 5 a --fail-on condition tripped, none could be evaluated, or the two "
    "captures are not comparable (diff: a gate never passes on them without --allow-incomparable)."
)
# The report's own: --ncu results are inputs too.
EXPLAIN_EXIT_CODES_HELP = (
    EXIT_CODES_HELP + " A --ncu result that is missing, unreadable or not an Nsight Compute CSV export (a .ncu-rep: "
    "the message prints the ncu --import command) exits 3 before the trace is read."
)
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def new_app() -> typer.Typer:
    """A command's typer app, configured alike for report, diff and fleet."""
    return typer.Typer(
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings=CONTEXT_SETTINGS,
    )


FORMATS_METAVAR = "[" + "|".join(f.value for f in Format) + "],..."


def parse_formats(value: object) -> tuple[Format, ...]:
    """--format's parser: formats, comma-separated, each a Format (the parser lists them)."""
    if isinstance(value, tuple):
        return value
    try:
        return Format.parse(str(value))
    except UsageError as exc:
        raise typer.BadParameter(exc.message.removeprefix("--format: ")) from None


def split_ids(values: list[str] | None) -> tuple[str, ...]:
    """--select/--ignore values: rule ids or prefixes, repeatable or comma-separated."""
    out: list[str] = []
    for v in values or []:
        out.extend(p.strip().upper() for p in v.split(",") if p.strip())
    return tuple(out)


def internal_error(exc: BaseException) -> int:
    """The one internal-error path: a line asking for a report (the traceback with DEBUG_VAR)."""
    if os.environ.get(DEBUG_VAR):
        traceback.print_exception(exc)
    typer.echo(
        f"{TOOL_NAME}: internal error: {type(exc).__name__}: {exc} "
        f"(please report it with the command you ran; set {DEBUG_VAR}=1 for a traceback)",
        err=True,
    )
    return int(ExitCode.INTERNAL)


def usage_error(exc: Exception) -> int:
    """A usage error the command line parser raised (unknown option, bad value, missing argument)."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    typer.echo(f"{TOOL_NAME}: error: {message} (see {TOOL_NAME} --help)", err=True)
    return int(ExitCode.USAGE)


@contextmanager
def user_facing_errors(what: str) -> Iterator[None]:
    """Turn every failure into one line on stderr and its documented exit code."""
    try:
        yield
    except ExplainError as exc:
        typer.echo(f"{TOOL_NAME}: error: {exc.message}", err=True)
        raise typer.Exit(int(exc.exit_code)) from None
    except KeyboardInterrupt:
        typer.echo(f"{TOOL_NAME}: interrupted; no {what} was written", err=True)
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        if os.environ.get(DEBUG_VAR):
            raise  # run() prints its traceback
        raise typer.Exit(internal_error(exc)) from None
