"""`nsys-llm-explain report TRACE --out DIR` (the default command: `report` may be left out):
explain() and Report.write() (write_report, which imports the analysis and the writers only
when a report is made).

    nsys-llm-explain run1.sqlite --out artifacts/run1/ --format md,json --md full
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nsys_llm_explainer.cli.common import (
    EXPLAIN_EXIT_CODES_HELP,
    FORMATS_METAVAR,
    new_app,
    parse_formats,
    split_ids,
    user_facing_errors,
)
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.options import KernelNameMode, Options, PhaseMap
from nsys_llm_explainer.render import ALL_FORMATS, Format, MdLayout
from nsys_llm_explainer.render.output import check_target

if TYPE_CHECKING:
    from nsys_llm_explainer.model import Report

report_app = new_app()


@report_app.command(epilog=EXPLAIN_EXIT_CODES_HELP)
def report(
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
    formats: Annotated[
        Any,  # tuple[Format, ...]: parse_formats reads the comma-separated text (the default too)
        typer.Option(
            "--format",
            parser=parse_formats,
            metavar=FORMATS_METAVAR,
            help="Outputs to write, comma-separated (ncu: the Nsight Compute plan).",
        ),
    ] = ALL_FORMATS,
    md: Annotated[
        MdLayout,
        typer.Option(
            "--md",
            help="report.md layout: compact (key facts open, the rest in closed sections, for pull "
            "requests) or full (every section open).",
        ),
    ] = MdLayout.COMPACT,
    kernel_name: Annotated[
        KernelNameMode,
        typer.Option("--kernel-name", help="Kernel names to show."),
    ] = KernelNameMode.DEMANGLED,
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
            help="Also replay each step with this change (repeatable): kernel:CATEGORY_OR_NAME=Kx "
            "(e.g. kernel:gemm=2x), a named change (host, launch, copies, readbacks, syncs, communication, "
            "fusion, slow_rank), or several joined with + as one scenario (e.g. host+kernel:gemm=2x).",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            help="Processes that read the trace, and threads that run metrics "
            "(default: one per CPU, at most 3).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Explain an Nsight Systems SQLite export or a PyTorch profiler trace of LLM work: findings, report.md,
    report.json, CSV tables.

    Example: nsys-llm-explain run1.sqlite --out artifacts/run1/"""
    with user_facing_errors("report"):
        if print_schema:
            from nsys_llm_explainer.trace.formats import describe

            typer.echo(describe(trace))
            return
        if out is None:
            raise UsageError("--out DIR is required (where report.md, report.json and tables/ go)")
        options = _options(
            kernel_name=kernel_name.value,
            min_gap_us=min_gap_us,
            max_gaps=max_gaps,
            top_n=top_n,
            phase_map=phase_map,
            nvtx_coverage_warn_threshold=nvtx_coverage_warn_threshold,
            nvtx_kernel_map=not no_nvtx_kernel_map,
            select=split_ids(select),
            ignore=split_ids(ignore),
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
        check_target(out, force)
        prefetching = _prefetch(trace, jobs)
        try:
            if prefetching:  # while the helper reads the trace: the writers and their templates
                from nsys_llm_explainer.render.writers import prepare

                prepare(formats, md.value)
            report = write_report(trace, out, options, formats, force=force, quiet=quiet, jobs=jobs, md=md.value)
        finally:
            if prefetching:
                from nsys_llm_explainer.trace.formats import cancel_prefetch

                cancel_prefetch()
        if not quiet:
            for line in summary_lines(report, out):
                typer.echo(line)


def _prefetch(trace: Path, jobs: int | None) -> bool:
    """Read the trace in a helper process while the analysis is imported, where its format
    has one (trace/formats.py: PyTorch profiler traces), when more than one process may run."""
    from nsys_llm_explainer.runtime.machine import default_jobs
    from nsys_llm_explainer.trace.formats import prefetch

    if (jobs if jobs is not None else default_jobs()) < 2:
        return False
    return prefetch(trace)


def _options(**kw: Any) -> Options:
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
    flops, tokens = _compute_options(
        kw.get("gpu_peaks"), kw.get("model_config"), kw.get("model_flops_per_token"), kw.get("tokens_per_step")
    )
    if flops is not None:
        kw["model_flops_per_token"] = flops
    if tokens is not None:
        kw["tokens_per_step"] = tokens
    if kw.get("what_if"):
        from nsys_llm_explainer.graph.changes import parse

        kw["what_if"] = tuple(parse(text).key for text in kw["what_if"])  # bad text: a usage error now
    pm = kw.pop("phase_map")
    return Options(phase_map=PhaseMap.load(pm) if pm is not None else PhaseMap(), **kw)


def _ncu_extra(paths: list[Path] | None) -> dict[str, tuple[str, ...]]:
    """Options.extra for --ncu: the results are read now, so that a bad one is an error
    before any work (ncu/ caches them for the report's ncu metric)."""
    if not paths:
        return {}
    from nsys_llm_explainer.ncu.results import load

    load(paths)
    return {"ncu": tuple(str(p) for p in paths)}


def _compute_options(
    gpu_peaks: str | None, model_config: str | None, flops_per_token: str | None, tokens_per_step: str | None
) -> tuple[float | None, int | None]:
    """Parse the MFU/roofline inputs; a bad file or value is a usage error before any work.
    Returns --model-flops-per-token and --tokens-per-step parsed (None where not given)."""
    if gpu_peaks is not None:
        from nsys_llm_explainer.compute.peaks import load_gpu_peaks

        load_gpu_peaks(gpu_peaks)
    if model_config is not None:
        from nsys_llm_explainer.compute.model_flops import load_model_config

        load_model_config(model_config)
    if flops_per_token is None and tokens_per_step is None:
        return None, None
    from nsys_llm_explainer.compute import model_flops

    return (
        model_flops.parse_model_flops_per_token(flops_per_token) if flops_per_token is not None else None,
        model_flops.parse_tokens_per_step(tokens_per_step) if tokens_per_step is not None else None,
    )


def write_report(
    trace: Path,
    out: Path,
    options: Options,
    formats: tuple[Format, ...],
    force: bool = False,
    quiet: bool = False,
    jobs: int | None = None,
    md: str = "compact",
) -> Report:
    """explain() and Report.write()."""
    from nsys_llm_explainer.api import explain

    progress = Progress(enabled=not quiet)
    try:
        report = explain(trace, options, progress=progress, jobs=jobs)
    finally:
        progress.close()
    report.write(out, formats, force=force, md=md)
    return report


def summary_lines(report: Report, out: Path) -> list[str]:
    from nsys_llm_explainer.model import Skipped

    lines = [f"wrote {out}/ ({len(report.findings)} findings)"]
    d = report.diagnosis
    if d is not None:
        lines.append(f"  verdict: {d.verdict} ({d.confidence.value}): {d.summary}")
    for f in report.findings[:5]:
        lines.append(f"  [{f.severity.value}] {f.rule_id} {f.title}")
    skipped = [m for m, o in report.metrics.items() if isinstance(o, Skipped)]
    if skipped:
        lines.append(f"  not measured: {', '.join(skipped)} (reasons in report.md)")
    if report.warnings:
        lines.append(f"  {len(report.warnings)} warning(s), see report.md")
    return lines


class Progress:
    """Progress on stderr while a long trace is read: phase name and rows processed.

    Silent unless stderr is a terminal, the run has lasted a couple of seconds, and --quiet
    is off, so logs and pipes stay clean.
    """

    SHOW_AFTER_S = 2.0
    MIN_INTERVAL_S = 0.25

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.started = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, phase: str, rows: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < self.SHOW_AFTER_S or now - self.last < self.MIN_INTERVAL_S:
            return
        self.last = now
        self.shown = True
        sys.stderr.write(f"\r\x1b[Kreading {phase}: {rows:,} rows")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
