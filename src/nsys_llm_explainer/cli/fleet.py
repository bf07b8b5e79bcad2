"""`nsys-llm-explain fleet PATH... --out DIR`: a thin typer app over fleet.run() and its writers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.cli.common import new_app, user_facing_errors
from nsys_llm_explainer.errors import ExitCode, InputError, UsageError
from nsys_llm_explainer.fleet import inputs as fleet_inputs
from nsys_llm_explainer.fleet import render_files, robust
from nsys_llm_explainer.fleet.inputs import TraceInput
from nsys_llm_explainer.options import KernelNameMode, Options, PhaseMap
from nsys_llm_explainer.render import output

FLEET_EXIT_CODES_HELP = (
    "Exit codes: 0 at least one trace was analyzed (failed traces are listed in the outputs); "
    "1 internal error; 2 usage error (also --scheduler without Dask installed); 3 no input found, "
    "no trace could be analyzed, the Dask scheduler cannot be reached or has no worker, or the Dask "
    "workers cannot read the traces; 4 output cannot be written."
)

fleet_app = new_app()


def _progress(quiet: bool) -> Any:
    if quiet:
        return None

    def show(done: int, total: int, t: TraceInput, r: dict[str, Any]) -> None:
        if r["ok"]:
            n = len(r["ranks"])
            what = f"{n} rank{'s' if n != 1 else ''}, {r['timing']['seconds']:.1f}s"
            what += " (cached)" if r["timing"]["cached"] else ""
        else:
            what = f"FAILED: {r['error']}"
        sys.stderr.write(f"fleet: [{done}/{total}] {t.path}: {what}\n")
        sys.stderr.flush()

    return show


@fleet_app.command(epilog=FLEET_EXIT_CODES_HELP)
def fleet_command(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Trace files, directories or glob patterns (one trace per rank, or traces holding several processes).",
            metavar="PATH",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output directory for fleet.md, fleet.json, fleet.html and tables/."),
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label",
            help="KEY=REGEX: run label from each trace path (the group named KEY, else the whole match); "
            "traces with the same label form one run of a sweep. Repeatable.",
        ),
    ] = None,
    runs: Annotated[
        Path | None, typer.Option("--runs", help="CSV with columns path,label assigning traces to runs.")
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Worker processes (default: all cores).", show_default=False),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="Run the per-trace work on Dask: tcp://HOST:PORT of a running scheduler, or 'local' "
            f"for a LocalCluster (needs: pip install '{TOOL_NAME}[distributed]').",
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option(
            "--cache-dir",
            help="Per-trace result cache (default: $NSYS_LLM_EXPLAIN_CACHE, else ~/.cache/nsys-llm-explain/fleet).",
        ),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Analyze every trace again; store nothing.")] = False,
    straggler_k: Annotated[
        float, typer.Option("--straggler-k", help="Straggler band: median + K x 1.4826 x MAD.")
    ] = robust.K,
    kernel_name: Annotated[
        KernelNameMode, typer.Option("--kernel-name", help="Kernel names.")
    ] = KernelNameMode.DEMANGLED,
    step_range: Annotated[
        str | None, typer.Option("--step-range", help="NVTX range name that marks one step.")
    ] = None,
    phase_map: Annotated[
        Path | None, typer.Option("--phase-map", "--phases-json", help="Phase map JSON (as for explain).")
    ] = None,
    kernel_categories: Annotated[
        Path | None, typer.Option("--kernel-categories", help="JSON file extending the kernel categories.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write into a non-empty directory that holds no previous output of ours.")
    ] = False,
    force_align: Annotated[
        bool,
        typer.Option(
            "--force-align",
            help="Align and compare the traces of a run even when they never overlapped in time or their "
            "metadata says they come from different jobs (refused otherwise; trust is then low).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr, no verdict on stdout.")] = False,
) -> None:
    """Compare the ranks of a multi-GPU job (which rank makes the others wait) and the runs of a sweep."""
    from nsys_llm_explainer import fleet

    with user_facing_errors("fleet result"):
        if out is None:
            raise UsageError("--out DIR is required (where fleet.md, fleet.json and tables/ go)")
        if jobs is not None and jobs < 1:
            raise UsageError("--jobs must be >= 1")
        if straggler_k <= 0:
            raise UsageError("--straggler-k must be > 0")
        if scheduler is not None:
            if scheduler != "local" and "://" not in scheduler:
                raise UsageError("--scheduler takes tcp://HOST:PORT or 'local'")
            try:
                import distributed  # noqa: F401
            except ImportError:
                raise UsageError(
                    f"--scheduler needs Dask: pip install '{TOOL_NAME}[distributed]'"
                ) from None
        if kernel_categories is not None:
            from nsys_llm_explainer.kernels.categories import load_table

            load_table(str(kernel_categories))
        skipped: list[str] = []
        duplicates: list[dict[str, str]] = []
        traces = fleet_inputs.collect(list(paths or []), list(label or []), runs, skipped, duplicates)
        if skipped and not quiet:
            sys.stderr.write(f"fleet: skipped {len(skipped)} JSON file(s) that are not traces "
                             f"(no traceEvents), first: {skipped[0]}\n")
        if duplicates and not quiet:
            repeat = duplicates[0]
            sys.stderr.write(f"fleet: counted {len(duplicates)} repeated trace(s) once, first: {repeat['path']} "
                             f"({repeat['how']} as {repeat['same_as']})\n")
        force = output.replaces_own_result(
            out, force, render_files.JSON_NAME, "fleet", ("tables", "plots"),
            ("report.json", "report.md", "diff.json"), "fleet result",
        )
        output.check_target(out, force)
        options = Options(
            kernel_name=kernel_name.value,
            step_range=step_range,
            phase_map=PhaseMap.load(phase_map) if phase_map is not None else PhaseMap(),
            kernel_categories=str(kernel_categories) if kernel_categories is not None else None,
        )
        result = fleet.run(
            traces, options, jobs=jobs, scheduler=scheduler,
            cache_dir=str(cache_dir) if cache_dir is not None else None,
            use_cache=not no_cache, progress=_progress(quiet), k=straggler_k, skipped=skipped,
            force_align=force_align, duplicates=duplicates,
        )
        if result.doc["inputs"]["ok"] == 0:
            first = next((f"{t['path']}: {t['error']}" for t in result.doc["traces"] if t["error"]), "no trace")
            raise InputError(f"no trace could be analyzed ({len(traces)} tried; first error: {first})")
        output.write(out, render_files.files(result), force=force)
        if not quiet:
            failed = result.doc["inputs"]["failed"]
            typer.echo(f"wrote {out}/ ({result.doc['inputs']['ranks']} ranks, {failed} failed trace(s))")
            from nsys_llm_explainer.fleet.render_text import verdict

            typer.echo(verdict(result.doc, plain=True))
    return None


__all__ = ["fleet_app", "FLEET_EXIT_CODES_HELP", "ExitCode"]
