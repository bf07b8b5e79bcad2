"""`nsys-llm-explain diff BASE NEW --out DIR`: a thin typer app over diff.diff() and its writers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.cli.common import EXIT_CODES_HELP, new_app, user_facing_errors
from nsys_llm_explainer.diff import diff, gate
from nsys_llm_explainer.diff import render as diff_render
from nsys_llm_explainer.errors import ExitCode, UsageError
from nsys_llm_explainer.options import KernelNameMode, Options, PhaseMap
from nsys_llm_explainer.render import output

SUMMARY_ENV = "GITHUB_STEP_SUMMARY"

diff_app = new_app()


def _append_summary(text: str) -> None:
    target = os.environ.get(SUMMARY_ENV)
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        typer.echo(
            f"{TOOL_NAME}: warning: cannot append to ${SUMMARY_ENV} ({exc.strerror or exc})",
            err=True,
        )


@diff_app.command(epilog=EXIT_CODES_HELP)
def diff_command(
    base: Annotated[
        Path,
        typer.Argument(
            help="Baseline: a trace (.sqlite, or PyTorch profiler .json/.json.gz), or a report.json "
            "(or its directory) written by us.",
            show_default=False,
        ),
    ],
    new: Annotated[
        Path,
        typer.Argument(
            help="Candidate: a trace, or a report.json (or its directory).", show_default=False
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Output directory for diff.md, diff.html, diff.json and tables/diff_kernels.csv.",
        ),
    ] = None,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on",
            help=f"Exit {int(ExitCode.GATE)} when METRIC OP NUMBER holds, e.g. step_time_pct>5, or "
            f"on '{gate.INCOMPARABLE}' when the captures cannot be compared (repeatable or "
            f"comma-separated). Metrics: {', '.join(m for m in gate.GATE_METRICS if m != gate.INCOMPARABLE)}. "
            "A gate none of whose conditions could be evaluated fails, and so does any gate on captures that "
            "are not comparable (different GPUs, jobs, programs or step definitions).",
        ),
    ] = None,
    allow_incomparable: Annotated[
        bool,
        typer.Option(
            "--allow-incomparable",
            help="Evaluate the --fail-on conditions on captures that are not comparable, instead of failing.",
        ),
    ] = False,
    allow_unevaluated: Annotated[
        bool,
        typer.Option(
            "--allow-unevaluated",
            help="Let the --fail-on gate pass when none of its conditions could be evaluated.",
        ),
    ] = False,
    kernel_name: Annotated[
        KernelNameMode, typer.Option("--kernel-name", help="Kernel names for trace inputs.")
    ] = KernelNameMode.DEMANGLED,
    phase_map: Annotated[
        Path | None,
        typer.Option("--phase-map", "--phases-json", help="Phase map JSON for trace inputs."),
    ] = None,
    step_range: Annotated[
        str | None,
        typer.Option("--step-range", help="NVTX range name that marks one step (trace inputs)."),
    ] = None,
    top_n: Annotated[
        int, typer.Option("--top-n", help="Kernel rows in diff.md (CSV and JSON keep all).")
    ] = 20,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty directory that holds no previous output of ours.",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No verdict line on stdout.")
    ] = False,
) -> None:
    """Compare two captures (before and after a change): deltas, findings, optional CI gate."""
    with user_facing_errors("diff"):
        if out is None:
            raise UsageError("--out DIR is required (where diff.md, diff.json and tables/ go)")
        if top_n < 1:
            raise UsageError("--top-n must be >= 1")
        conditions = gate.parse(fail_on)
        force = output.replaces_own_result(
            out, force, diff_render.JSON_NAME, "diff.", ("tables",), ("report.json", "report.md"), "diff"
        )
        output.check_target(out, force)
        options = Options(
            kernel_name=kernel_name.value,
            step_range=step_range,
            phase_map=PhaseMap.load(phase_map) if phase_map is not None else PhaseMap(),
        )
        result = diff(base, new, options, conditions, allow_unevaluated, allow_incomparable)
        files = diff_render.files(result, top_n)
        output.write(out, files, force=force)
        _append_summary(files[diff_render.MD_NAME])
        if not quiet:
            typer.echo(diff_render.verdict(result))
    if result.doc["gate"]["tripped"]:
        raise typer.Exit(int(ExitCode.GATE))
