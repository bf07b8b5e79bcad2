"""Command line: a thin typer app over explain() and Report.write().

Only what parsing the command line needs is imported here; the analysis and the writers
(numpy, pandas, Jinja) load when a report is made, so --help and --version answer at once.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from nsys_llm_explainer import TOOL_NAME, __version__
from nsys_llm_explainer.errors import ExitCode, ExplainError, UsageError
from nsys_llm_explainer.options import KERNEL_NAME_MODES, Options
from nsys_llm_explainer.options.phases import PhaseMap
from nsys_llm_explainer.render import ALL_FORMATS, MD_LAYOUTS, Format
from nsys_llm_explainer.render.output import check_target

DEBUG_VAR = "NSYS_LLM_EXPLAIN_DEBUG"  # set: internal errors print their traceback
EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 internal error (please report it); 2 usage error; "
    "3 input missing, unreadable or not a trace this tool reads (an Nsight Systems SQLite export "
    "or a PyTorch profiler JSON trace); "
    "4 output cannot be written; 5 a --fail-on condition tripped, or none could be evaluated (diff)."
)
# The report's own: --ncu results are inputs too.
EXPLAIN_EXIT_CODES_HELP = (
    EXIT_CODES_HELP + " A --ncu result that is missing, unreadable or not an Nsight Compute CSV export (a .ncu-rep: "
    "the message prints the ncu --import command) exits 3 before the trace is read."
)

def new_app() -> typer.Typer:
    """A command's typer app, configured alike for explain, diff and fleet."""
    return typer.Typer(
        add_completion=False,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )


app = new_app()


def _split_ids(values: list[str] | None) -> tuple[str, ...]:
    out: list[str] = []
    for v in values or []:
        out.extend(p.strip().upper() for p in v.split(",") if p.strip())
    return tuple(out)


def _fail(exc: ExplainError) -> typer.Exit:
    typer.echo(f"{TOOL_NAME}: error: {exc.message}", err=True)
    return typer.Exit(int(exc.exit_code))


def _internal(exc: BaseException) -> typer.Exit:
    if os.environ.get(DEBUG_VAR):
        raise exc  # run() prints its traceback
    typer.echo(
        f"{TOOL_NAME}: internal error: {type(exc).__name__}: {exc} "
        f"(please report it with the command you ran; set {DEBUG_VAR}=1 for a traceback)",
        err=True,
    )
    return typer.Exit(int(ExitCode.INTERNAL))


@contextmanager
def user_facing_errors(what: str) -> Iterator[None]:
    """Turn every failure into one line on stderr and its documented exit code."""
    try:
        yield
    except ExplainError as exc:
        raise _fail(exc) from None
    except KeyboardInterrupt:
        typer.echo(f"{TOOL_NAME}: interrupted; no {what} was written", err=True)
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as exc:  # noqa: BLE001 - never a traceback for the user
        raise _internal(exc) from None


def _print_version(value: bool) -> None:
    """--version is eager: it answers before the trace argument is required."""
    if value:
        typer.echo(f"{TOOL_NAME} {__version__}")
        raise typer.Exit(0)


@app.command(epilog=EXPLAIN_EXIT_CODES_HELP)
def explain(
    trace: Annotated[
        Path,
        typer.Argument(
            help="Nsight Systems SQLite export (nsys export --type sqlite) or PyTorch profiler "
            "trace (Kineto JSON, plain or .gz; any file name).",
            show_default=False
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Output directory for report.md, report.json and tables/."
        ),
    ] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help=f"Outputs to write, comma-separated: {ALL_FORMATS} (Nsight Compute plan).",
        ),
    ] = ALL_FORMATS,
    md: Annotated[
        str,
        typer.Option(
            "--md",
            help="report.md layout: compact (key facts open, the rest in closed sections, for pull "
            "requests) or full (every section open).",
        ),
    ] = "compact",
    kernel_name: Annotated[
        str,
        typer.Option("--kernel-name", help="Kernel names to show: demangled, short or mangled."),
    ] = "demangled",
    min_gap_us: Annotated[
        float,
        typer.Option(
            "--min-gap-us",
            help="List GPU idle gaps at least this long (microseconds) in gpu_idle_gaps.csv.",
        ),
    ] = 10.0,
    max_gaps: Annotated[
        int,
        typer.Option(
            "--max-gaps", help="How many of the largest gaps report.json and report.md list."
        ),
    ] = 50,
    top_n: Annotated[
        int,
        typer.Option(
            "--top-n", help="Rows per table in report.md (CSV keeps all; report.json at least this many)."
        ),
    ] = 20,
    phase_map: Annotated[
        Path | None,
        typer.Option(
            "--phase-map",
            "--phases-json",
            help="JSON file mapping phases to NVTX name patterns (substring, or re:regex).",
        ),
    ] = None,
    nvtx_coverage_warn_threshold: Annotated[
        float,
        typer.Option(
            "--nvtx-coverage-warn-threshold",
            help="Warn when NVTX ranges cover less than this fraction of kernel time.",
        ),
    ] = 0.7,
    no_nvtx_kernel_map: Annotated[
        bool, typer.Option("--no-nvtx-kernel-map", help="Skip NVTX -> kernel attribution.")
    ] = False,
    select: Annotated[
        list[str] | None,
        typer.Option("--select", help="Only these rule ids (or prefixes), comma-separated."),
    ] = None,
    ignore: Annotated[
        list[str] | None,
        typer.Option("--ignore", help="Skip these rule ids (or prefixes), comma-separated."),
    ] = None,
    print_schema: Annotated[
        bool, typer.Option("--print-schema", help="Print the tables and columns found, then exit.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty directory that holds no previous report (other files are kept).",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No summary on stdout, no progress on stderr.")
    ] = False,
    include_capture_info: Annotated[
        bool,
        typer.Option(
            "--include-capture-info", help="Add capture metadata (secrets redacted) to the report."
        ),
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", help="Stop any single metric after this many seconds (default: no limit)."
        ),
    ] = None,
    step_range: Annotated[
        str | None,
        typer.Option(
            "--step-range",
            help="NVTX range name that marks one serving step (default: phase map, else automatic).",
        ),
    ] = None,
    kernel_categories: Annotated[
        Path | None,
        typer.Option(
            "--kernel-categories",
            help="JSON file extending or overriding the kernel category table.",
        ),
    ] = None,
    gpu_peaks: Annotated[
        Path | None,
        typer.Option(
            "--gpu-peaks",
            help="JSON file of GPU peak figures (TFLOPS per dtype, HBM GB/s) replacing or adding "
            "to the built-in table (docs/compute.md).",
        ),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="The model's Hugging Face config.json (FLOPs per token, decode bytes for MFU/MBU).",
        ),
    ] = None,
    model_flops_per_token: Annotated[
        str | None,
        typer.Option(
            "--model-flops-per-token",
            help="Model FLOPs per token for MFU (e.g. 1.2e9 or 1.2G); overrides --model's count.",
            show_default=False,
        ),
    ] = None,
    tokens_per_step: Annotated[
        str | None,
        typer.Option(
            "--tokens-per-step",
            help="Tokens each step processes, for MFU (default: the embedding's recorded input).",
            show_default=False,
        ),
    ] = None,
    ncu: Annotated[
        list[Path] | None,
        typer.Option(
            "--ncu",
            help="Nsight Compute results to merge into the report: a CSV export (ncu --csv --page details "
            "or raw; what ncu_plan.sh writes) or a folder of them. Repeatable.",
            show_default=False,
        ),
    ] = None,
    what_if: Annotated[
        list[str] | None,
        typer.Option(
            "--what-if",
            help="Also replay each step with this change (repeatable): kernel:CATEGORY_OR_NAME=Kx, "
            "e.g. kernel:gemm=2x.",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            help="Processes that read a large Nsight Systems export "
            "(default: one per CPU, at most 3).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """Explain an Nsight Systems SQLite export or a PyTorch profiler trace of LLM work: findings, report.md,
    report.json, CSV tables."""
    with user_facing_errors("report"):
        if print_schema:
            from nsys_llm_explainer.cli.report_files import schema_text

            typer.echo(schema_text(trace))
            return
        if out is None:
            raise UsageError("--out DIR is required (where report.md, report.json and tables/ go)")
        options = _options(
            kernel_name=kernel_name,
            min_gap_us=min_gap_us,
            max_gaps=max_gaps,
            top_n=top_n,
            phase_map=phase_map,
            nvtx_coverage_warn_threshold=nvtx_coverage_warn_threshold,
            nvtx_kernel_map=not no_nvtx_kernel_map,
            select=_split_ids(select),
            ignore=_split_ids(ignore),
            include_capture_info=include_capture_info,
            timeout_s=timeout,
            step_range=step_range,
            kernel_categories=str(kernel_categories) if kernel_categories is not None else None,
            gpu_peaks=str(gpu_peaks) if gpu_peaks is not None else None,
            model_config=str(model) if model is not None else None,
            model_flops_per_token=model_flops_per_token,
            tokens_per_step=tokens_per_step,
            extra=_ncu_extra(ncu),
            what_if=tuple(what_if or ()),
        )
        if jobs is not None and jobs < 1:
            raise UsageError("--jobs must be >= 1")
        formats = Format.parse(format)
        if md not in MD_LAYOUTS:
            raise UsageError(f"--md: unknown layout {md!r} (choose from {', '.join(MD_LAYOUTS)})")
        check_target(out, force)
        from nsys_llm_explainer.cli.report_files import summary_lines, write_report

        report = write_report(trace, out, options, formats, force=force, quiet=quiet, jobs=jobs, md=md)
        if not quiet:
            for line in summary_lines(report, out):
                typer.echo(line)


def _options(**kw: Any) -> Options:
    if kw["kernel_name"] not in KERNEL_NAME_MODES:
        raise UsageError(f"--kernel-name must be one of {', '.join(KERNEL_NAME_MODES)}")
    if kw["min_gap_us"] < 0:
        raise UsageError("--min-gap-us must be >= 0")
    if kw["max_gaps"] < 0 or kw["top_n"] < 1:
        raise UsageError("--max-gaps must be >= 0 and --top-n >= 1")
    if not 0.0 <= kw["nvtx_coverage_warn_threshold"] <= 1.0:
        raise UsageError("--nvtx-coverage-warn-threshold must be between 0 and 1")
    if kw["timeout_s"] is not None and kw["timeout_s"] <= 0:
        raise UsageError("--timeout must be > 0 seconds")
    if kw.get("kernel_categories") is not None:
        from nsys_llm_explainer.kernels.categories import load_table

        load_table(kw["kernel_categories"])  # a bad file is a usage error before any work
    _compute_options(kw)
    if kw.get("what_if"):
        from nsys_llm_explainer.graph.changes import parse

        kw["what_if"] = tuple(parse(text).key for text in kw["what_if"])  # bad text: a usage error now
    pm = kw.pop("phase_map")
    return Options(phase_map=PhaseMap.load(pm) if pm is not None else PhaseMap(), **kw)


def _ncu_extra(paths: list[Path] | None) -> dict[str, Any]:
    """Options.extra for --ncu: the results are read now, so that a bad one is an error
    before any work (ncu/ caches them for the report's ncu metric)."""
    if not paths:
        return {}
    from nsys_llm_explainer.ncu import load

    load(paths)
    return {"ncu": tuple(str(p) for p in paths)}


def _compute_options(kw: dict[str, Any]) -> None:
    """Parse the MFU/roofline inputs; a bad file or value is a usage error before any work."""
    if kw.get("gpu_peaks") is not None:
        from nsys_llm_explainer.compute.peaks import load_gpu_peaks

        load_gpu_peaks(kw["gpu_peaks"])
    if kw.get("model_config") is not None:
        from nsys_llm_explainer.compute.model_config import load_model_config

        load_model_config(kw["model_config"])
    if kw.get("model_flops_per_token") is not None or kw.get("tokens_per_step") is not None:
        from nsys_llm_explainer.compute import model_flops

        if kw.get("model_flops_per_token") is not None:
            kw["model_flops_per_token"] = model_flops.parse_model_flops_per_token(kw["model_flops_per_token"])
        if kw.get("tokens_per_step") is not None:
            kw["tokens_per_step"] = model_flops.parse_tokens_per_step(kw["tokens_per_step"])


def _usage_error(exc: Exception) -> int:
    msg = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    typer.echo(f"{TOOL_NAME}: error: {msg} (see {TOOL_NAME} --help)", err=True)
    return int(ExitCode.USAGE)


def run(argv: list[str] | None = None) -> int:
    """Dispatch: `diff`, `fleet` and `ncu` go to their commands, anything else to explain."""
    args = list(sys.argv[1:] if argv is None else argv)
    target = app
    prog = TOOL_NAME
    if args and args[0] == "diff":
        from nsys_llm_explainer.cli.diff import diff_app

        target, prog, args = diff_app, f"{TOOL_NAME} diff", args[1:]
    elif args and args[0] == "fleet":
        from nsys_llm_explainer.cli.fleet import fleet_app

        target, prog, args = fleet_app, f"{TOOL_NAME} fleet", args[1:]
    elif args and args[0] == "ncu":
        from nsys_llm_explainer.cli.ncu import ncu_app

        target, prog, args = ncu_app, f"{TOOL_NAME} ncu", args[1:]
    command = typer.main.get_command(target)
    try:
        rv = command.main(args=args, prog_name=prog, standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        typer.echo(f"{TOOL_NAME}: aborted", err=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - click usage errors arrive here
        if hasattr(exc, "exit_code") and hasattr(exc, "format_message"):
            return _usage_error(exc)
        if os.environ.get(DEBUG_VAR):
            traceback.print_exc()
        typer.echo(
            f"{TOOL_NAME}: internal error: {type(exc).__name__}: {exc} "
            f"(please report it with the command you ran; set {DEBUG_VAR}=1 for a traceback)",
            err=True,
        )
        return int(ExitCode.INTERNAL)
    return int(rv) if isinstance(rv, int) else 0


# The analysis does no linear algebra, so numpy's BLAS needs no thread pool; a pool's idle
# threads spin on the cores that the metric threads use (on 2 cores: about 0.1 s of a 0.9 s
# report). Set before numpy is imported; a user's own setting is kept.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS")


def main() -> None:
    from nsys_llm_explainer.runtime.alloc import tune_allocator

    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, "1")
    tune_allocator()  # before any large array exists; see runtime/alloc.py
    code = run()
    if sys.argv[1:2] == ["fleet"]:  # its worker pools and Dask clients shut down at exit
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
