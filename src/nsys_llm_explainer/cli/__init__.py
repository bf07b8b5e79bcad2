"""Command line: one command group, a thin layer over the library. `report` (explain a trace,
the default command: `nsys-llm-explain TRACE --out DIR` is `nsys-llm-explain report TRACE
--out DIR`), `diff` and `fleet`, each in its own module, imported only when it runs.

Only what parsing the command line needs is imported here; the analysis and the writers
(numpy, pandas, Jinja) load when a report is made, so --help and --version answer at once.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from nsys_llm_explainer.about import TOOL_NAME, __version__
from nsys_llm_explainer.cli.common import CONTEXT_SETTINGS, EXIT_CODES_HELP, internal_error, usage_error

# name -> (module, its typer app, one line for the group's help), in help order
COMMANDS = {
    "report": ("nsys_llm_explainer.cli.report", "report_app", "Explain one trace (the default command)."),
    "diff": ("nsys_llm_explainer.cli.diff", "diff_app", "Compare two captures: deltas, findings, CI gate."),
    "fleet": ("nsys_llm_explainer.cli.fleet", "fleet_app", "Compare the ranks of a job and the runs of a sweep."),
    "ncu": ("nsys_llm_explainer.cli.ncu", "ncu_app", "Read Nsight Compute results (CSV exports)."),
}
DEFAULT_COMMAND = "report"
# Commands whose worker pools and Dask clients shut down at interpreter exit (no _exit_now).
TEARDOWN_COMMANDS = frozenset({"fleet"})


class DefaultGroup(TyperGroup):
    """A group with a default command, as click-default-group does it: when the first
    argument names no command (a trace path, an option of the report), the arguments go to
    DEFAULT_COMMAND. A command's module is imported only when it runs."""

    invoked: str | None = None  # the command that ran

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[cmd_name]
        return typer.main.get_command(getattr(importlib.import_module(module), attr))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        own = {opt for param in self.get_params(ctx) for opt in param.opts}
        if not args or (args[0] not in COMMANDS and args[0] not in own):
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)  # type: ignore[no-any-return]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        self.invoked = name
        return name, command, rest

    def format_usage(self, ctx: Any, formatter: Any) -> None:
        formatter.write_usage(ctx.command_path, "[report] TRACE [OPTIONS] | COMMAND [ARGS]...")

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands with their one line, without importing them (--help stays instant)."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, line) for name, (_, _, line) in COMMANDS.items()])


def _print_version(value: bool) -> None:
    """--version is eager: it answers before anything else is parsed."""
    if value:
        typer.echo(f"{TOOL_NAME} {__version__}")
        raise typer.Exit(0)


app = typer.Typer(
    cls=DefaultGroup,
    name=TOOL_NAME,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT_SETTINGS,
    epilog=EXIT_CODES_HELP,
)


@app.callback()
def group(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """Explain GPU profiles of LLM work (Nsight Systems SQLite exports, PyTorch profiler traces).
    `nsys-llm-explain TRACE --out DIR` runs `report`; `nsys-llm-explain COMMAND --help` lists a
    command's options."""


def run(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]) and return its exit code."""
    return _run(argv)[0]


def _run(argv: list[str] | None) -> tuple[int, str | None]:
    """The exit code, and which command ran."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=args, prog_name=TOOL_NAME, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code), getattr(command, "invoked", None)
    except typer.Abort:
        typer.echo(f"{TOOL_NAME}: aborted", err=True)
        return 130, getattr(command, "invoked", None)
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        if hasattr(exc, "exit_code") and hasattr(exc, "format_message"):  # the parser's usage errors
            return usage_error(exc), getattr(command, "invoked", None)
        return internal_error(exc), getattr(command, "invoked", None)
    return (int(rv) if isinstance(rv, int) else 0), getattr(command, "invoked", None)


# The analysis does no linear algebra, so numpy's BLAS needs no thread pool; a pool's idle
# threads spin on the cores that the metric threads use (on 2 cores: about 0.1 s of a 0.9 s
# report). Set before numpy is imported; a user's own setting is kept.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def main() -> None:
    from nsys_llm_explainer.runtime.machine import tune_allocator, tune_gc

    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, "1")
    tune_allocator()  # before any large array exists; see runtime/machine.py
    tune_gc()
    code, invoked = _run(None)
    if invoked in TEARDOWN_COMMANDS:
        sys.exit(code)
    _exit_now(code)


def _exit_now(code: int) -> None:
    """End the process without the interpreter's teardown, which frees every object of
    pandas, numpy and the analysis one at a time: about 0.08 s, a tenth of a small report's
    run, for memory the kernel reclaims anyway. The report's files are closed by now and
    nothing is registered to run at exit; only the standard streams hold buffered text."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # a reader that stopped early (| head)
            pass
        except (OSError, ValueError):  # output lost (disk full, closed): as Python's own exit says
            code = code or 120
    os._exit(code)
