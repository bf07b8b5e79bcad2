"""`nsys-llm-explain ncu RESULTS... --out DIR`: a thin typer app over ncu.load/assess and
render/ncu.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.cli.common import new_app, user_facing_errors
from nsys_llm_explainer.errors import UsageError
from nsys_llm_explainer.render import output

NCU_EXIT_CODES_HELP = (
    "Exit codes: 0 success; 1 internal error (please report it); 2 usage error; 3 a result missing or "
    "unreadable, not an Nsight Compute CSV export (a .ncu-rep file: the message prints the ncu --import "
    "command that exports it), or no kernel launch in any of them; 4 output cannot be written."
)

ncu_app = new_app()


@ncu_app.command(epilog=NCU_EXIT_CODES_HELP)
def ncu_command(
    results: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Nsight Compute CSV exports (ncu --csv --page details or --page raw, or ncu --import "
            "X.ncu-rep --csv), or folders of them (searched with their subfolders).",
            metavar="RESULTS",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output directory for ncu.md, ncu.json, ncu.csv and ncu_roofline.svg."),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            help="GPU name for the peak table (e.g. 'NVIDIA A100-SXM4-80GB') when the exports do not name "
            "it (the details page does not).",
            show_default=False,
        ),
    ] = None,
    gpu_peaks: Annotated[
        Path | None,
        typer.Option("--gpu-peaks", help="JSON file of GPU peak figures replacing or adding to the built-in table."),
    ] = None,
    top_n: Annotated[int, typer.Option("--top-n", help="Launch rows in ncu.md (ncu.csv and ncu.json keep all).")] = 50,
    force: Annotated[
        bool,
        typer.Option("--force", help="Write into a non-empty directory that holds no previous output of ours."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stdout.")] = False,
) -> None:
    """Read Nsight Compute results: each launch's duration, throughputs, DRAM bytes, occupancy,
    FLOPs, roofline point and class (compute-, memory-, latency-bound or balanced) with its limiter.

    Example: nsys-llm-explain ncu ncu_results/ --out ncu_summary/"""
    with user_facing_errors("Nsight Compute summary"):
        if not results:
            raise UsageError("give one or more Nsight Compute CSV exports, or folders of them")
        if out is None:
            raise UsageError("--out DIR is required (where ncu.md, ncu.json and ncu.csv go)")
        if top_n < 1:
            raise UsageError("--top-n must be >= 1")
        force = output.replaces_own_result(
            out, force, "ncu.json", "ncu", (), ("report.json", "report.md", "diff.json", "fleet.json"),
            "Nsight Compute summary",
        )
        output.check_target(out, force)
        table = None
        if gpu_peaks is not None:
            from nsys_llm_explainer.compute.peaks import load_gpu_peaks

            table = load_gpu_peaks(gpu_peaks).by_name
        from nsys_llm_explainer.compute import peaks
        from nsys_llm_explainer.ncu.results import assess, load
        from nsys_llm_explainer.render import ncu as ncu_render

        if gpu is not None and peaks.lookup(gpu, table) is None:
            raise UsageError(
                f"--gpu {gpu!r}: not in the peak table (docs/compute.md lists it; add it with --gpu-peaks)"
            )
        results_ = assess(load(results), (gpu, "--gpu") if gpu else None, table)
        output.write(out, ncu_render.files(results_, top_n), force=force)
        if not quiet:
            for line in summary_lines(results_, out):
                typer.echo(line)


def summary_lines(results: object, out: Path) -> list[str]:
    from nsys_llm_explainer.ncu.results import Results, summary

    assert isinstance(results, Results)
    s = summary(results)
    classes = ", ".join(f"{n} {c}" for c, n in s["classes"].items() if n) or "none classified"
    return [
        f"{TOOL_NAME} ncu: {s['launch_count']} launches of {s['kernel_count']} kernels from {len(s['files'])} "
        f"files: {classes}",
        f"wrote {out / 'ncu.md'}, ncu.json, ncu.csv",
    ]
