"""explain(path, options) -> Report: the one entry point for the CLI, scripts and notebooks.

Report here is the facade over the report's data (model.Report): it adds the outputs,
to_dict() (report.json), table() (the CSV tables) and write() (the files), from render/.
"""

from __future__ import annotations

import copy
import dataclasses
import sqlite3
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from nsys_llm_explainer import model
from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.analysis.context import Context
from nsys_llm_explainer.analysis.devices import described
from nsys_llm_explainer.diagnosis import accounting, diagnose, workload_of
from nsys_llm_explainer.errors import InputError, MetricTimeout
from nsys_llm_explainer.metrics import REGISTRY, Metric, in_run_order
from nsys_llm_explainer.model import (
    GpuInfo,
    Outcome,
    ProcessInfo,
    Schema,
    Skipped,
    TraceFormat,
    TraceInfo,
    typed_result,
)
from nsys_llm_explainer.options import Options
from nsys_llm_explainer.render import ALL_FORMATS
from nsys_llm_explainer.results.kernels import PerProcess, TopKernels
from nsys_llm_explainer.rules.engine import apply_rules
from nsys_llm_explainer.runtime import machine, runner
from nsys_llm_explainer.runtime.machine import default_jobs
from nsys_llm_explainer.trace import deadline, formats
from nsys_llm_explainer.trace.data import TraceData, Unavailable
from nsys_llm_explainer.trace.nsys.fetch import Progress

if TYPE_CHECKING:
    from nsys_llm_explainer.kernels.labels import Labels
    from nsys_llm_explainer.render.report_types import ReportDoc
    from nsys_llm_explainer.render.shared import Shared

MIN_PLAUSIBLE_WINDOW_NS = 1_000  # a capture shorter than 1 us suggests non-ns timestamps
MAX_PLAUSIBLE_WINDOW_NS = 30 * 24 * 3600 * 10**9


def run_metric(metric: Metric, ctx: Context) -> Outcome:
    try:
        with deadline.limit(ctx.data.interruptible, ctx.options.timeout_s):
            return metric.run(ctx)
    except Unavailable as exc:
        return Skipped(metric.id, exc.reason)
    except MetricTimeout:
        limit = f"--timeout {ctx.options.timeout_s:g}s"
        ctx.data.warnings.append(
            f"metric {metric.id} was stopped by {limit}; the rest of the report is complete"
        )
        return Skipped(metric.id, f"it was stopped by {limit} before it finished")
    except sqlite3.DatabaseError as exc:
        ctx.data.warnings.append(f"metric {metric.id}: the database could not be read ({exc})")
        return Skipped(metric.id, f"the database could not be read ({exc})")
    except Exception as exc:  # noqa: BLE001 - one metric's bug must not lose the whole report
        ctx.data.warnings.append(
            f"metric {metric.id} failed with an internal error ({type(exc).__name__}: {exc}); "
            f"please report it to the {TOOL_NAME} issue tracker"
        )
        return Skipped(metric.id, f"internal error ({type(exc).__name__}); see warnings")


def _trace_info(
    path: Path, schema: Schema, data: TraceData, metrics: dict[str, Outcome]
) -> TraceInfo:
    listed, _ = described(data)
    gpus = {g.device_id: g for g in listed}
    starts, ends = [], []
    for table in ("kernels", "runtime"):
        try:
            span = data.span(table)
        except Unavailable:
            continue
        if span is not None:
            starts.append(span[0])
            ends.append(span[1])
    tk = typed_result(metrics, TopKernels)
    if tk is not None:
        for dev in tk.devices:  # every device that ran kernels is listed, described or not
            gpus.setdefault(dev, GpuInfo(device_id=dev, name=None))
    pp = typed_result(metrics, PerProcess)
    processes: tuple[ProcessInfo, ...] = ()
    if pp is not None:
        processes = tuple(ProcessInfo(pid=p.pid, kernel_count=p.kernel_count) for p in pp.processes)
    tables = data.table_counts()
    return TraceInfo(
        path=str(path),
        size_bytes=path.stat().st_size,
        nsys_version=schema.nsys_version,
        export_schema_version=schema.export_schema_version,
        gpus=tuple(gpus[d] for d in sorted(gpus)),
        processes=processes,
        window_start_ns=min(starts) if starts else None,
        window_end_ns=max(ends) if ends else None,
        tables=tables,
        format=data.format,
        format_details=data.format_details(),
        distributed=data.distributed(),
    )


def _with_capture_info(data: TraceData, info: TraceInfo) -> tuple[TraceInfo, model.CaptureInfo]:
    """Only with --include-capture-info: capture metadata (secrets redacted), process names."""
    capture_info = data.capture_info([p.pid for p in info.processes])
    names = {p["pid"]: p["name"] for p in capture_info["processes"]}
    processes = tuple(dataclasses.replace(p, name=names.get(p.pid)) for p in info.processes)
    return dataclasses.replace(info, processes=processes), capture_info


def _limitations(
    schema: Schema, info: TraceInfo, metrics: dict[str, Outcome], capture_info: bool = False
) -> list[str]:
    if capture_info:
        out = [
            "Capture metadata is included (--include-capture-info); values of secret-looking variables and "
            "flags are redacted."
        ]
    else:
        out = [
            "Process names, command lines and environment variables from the capture are never shown."
        ]
    if info.window_start_ns is not None and info.window_end_ns is not None:
        window = info.window_end_ns - info.window_start_ns
        if not MIN_PLAUSIBLE_WINDOW_NS <= window <= MAX_PLAUSIBLE_WINDOW_NS:
            out.append(
                f"The captured window is {window} time units long: timestamps may not be nanoseconds."
            )
    if not any(g.name for g in info.gpus):
        where = "TARGET_INFO_GPU rows" if info.format is TraceFormat.NSYS else "deviceProperties"
        out.append(f"No {where}: GPU models are unknown.")
    # Metrics skipped for the same reason share one line (a trace without kernels skips most).
    skipped: dict[str, list[str]] = {}
    lines: list[str | list[str]] = []  # a metric list stands for its skip line
    for mid, outcome in metrics.items():
        if isinstance(outcome, Skipped):
            if outcome.reason not in skipped:
                skipped[outcome.reason] = []
                lines.append(skipped[outcome.reason])
            skipped[outcome.reason].append(mid)
        else:
            lines.extend(f"{mid}: {note}" for note in outcome.notes)
    reason_of = {id(ids): reason for reason, ids in skipped.items()}
    out.extend(
        line if isinstance(line, str) else f"{', '.join(line)}: not measured, because {reason_of[id(line)]}."
        for line in lines
    )
    if schema.nsys_version is None and info.format is TraceFormat.NSYS:
        out.append("The nsys version is unknown (no export metadata).")
    return out


def explain(
    path: Path | str,
    options: Options | None = None,
    progress: Progress | None = None,
    jobs: int | None = None,
) -> Report:
    """Analyze one trace: an Nsight Systems SQLite export or a PyTorch profiler trace
    (Kineto JSON, plain or gzipped), told apart by content. Raises InputError for unusable
    inputs.

    `jobs`: processes that read the trace and threads that run metrics (None:
    default_jobs(); 1: this process and thread only). The report does not depend on it."""
    path = Path(path)
    options = options or Options()
    jobs = default_jobs() if jobs is None else jobs
    data = formats.open_trace(path, kernel_name=options.kernel_name, progress=progress, jobs=jobs)
    schema = data.schema
    try:
        ctx = Context(schema, data, options)
        metrics = [m for m in REGISTRY if m.wanted(options)]
        rows = data.kernel_rows_estimate()
        how = runner.plan(rows, jobs)
        data.threads = how.threads  # per-device parts of a metric may share its threads
        results = runner.run_metrics(in_run_order(metrics), ctx, run_metric, how)
        ctx.results.update({m.id: results[m.id] for m in metrics})  # in report order
        info = _trace_info(path, schema, data, ctx.results)
        warnings = list(schema.warnings)
        # Sorted: the order does not depend on which metric loads a table (and warns) first.
        warnings.extend(sorted(data.warnings))
        acct = accounting.build(ctx.results)
        workload = workload_of(ctx.results)
        findings = apply_rules(ctx.results, options, schema, warnings, acct, workload.kind)
        diagnosis = diagnose(info, ctx.results, acct)
        capture_info = None
        if options.include_capture_info:
            info, capture_info = _with_capture_info(data, info)
        missing = data.missing_names()
        if missing:
            warnings.append(
                f"StringIds: {missing} referenced ids are missing; shown as '(unknown name) #id'"
            )
        limitations = _limitations(schema, info, ctx.results, options.include_capture_info)
        limitations.extend(data.format_limitations())
    except sqlite3.DatabaseError as exc:
        raise InputError(
            f"{path}: the database could not be read ({exc}); export the capture again"
        ) from None
    finally:
        data.close()
        # The tables and intermediates go now, not when the garbage collector finds them:
        # the writers run next, and at millions of rows they would hold gigabytes meanwhile.
        data.release_all()
        machine.release_free_memory()
    return Report(
        trace=info,
        metrics=dict(ctx.results),
        findings=findings,
        warnings=tuple(dict.fromkeys(warnings)),
        limitations=tuple(limitations),
        options=options.to_json(),
        capture_info=capture_info,
        diagnosis=diagnosis,
    )


class Report(model.Report):
    """What explain() returns: the report's data (model.Report: `trace`, `metrics`,
    `findings`, `diagnosis` ...) and its outputs, as the notebook and script API.

    to_dict() is report.json; table(name) a CSV table as a DataFrame; write() the files.
    """

    @cached_property
    def shared(self) -> Shared:
        """What the writers compute once per report (render/shared.py)."""
        from nsys_llm_explainer.render.shared import Shared

        return Shared(self.data())

    @property
    def document(self) -> ReportDoc:
        """report.json as a dict, built once: read it, do not change it (to_dict() returns a
        copy to keep)."""
        return self.shared.document

    @property
    def kernel_labels(self) -> Labels:
        """Full kernel name -> the short label every writer shows (kernels/labels.py)."""
        return self.shared.labels

    def data(self) -> model.Report:
        """The report's data alone, as the writers take it."""
        return model.Report(**{f.name: getattr(self, f.name) for f in dataclasses.fields(model.Report)})

    def to_dict(self) -> ReportDoc:
        """The content of report.json (a copy: changing it changes nothing else)."""
        return copy.deepcopy(self.document)

    def table_names(self) -> list[str]:
        """The CSV table names (tables/<name>.csv), in report order."""
        from nsys_llm_explainer.render import csv_writer

        return list(csv_writer.tables(self))

    def table(self, name: str) -> pd.DataFrame:
        """The rows of tables/<name>.csv (`name` with or without `.csv`); KeyError for an
        unknown name. A metric that did not run gives its table empty, with its columns."""
        from nsys_llm_explainer.render import csv_writer

        return csv_writer.frame(self, name.removesuffix(".csv"), self.shared)

    def write(
        self,
        out_dir: Path | str,
        formats: str | Iterable[str] = ALL_FORMATS,
        force: bool = False,
        md: str = "compact",
    ) -> Path:
        """Write the report files into `out_dir`, as the CLI does (`formats`: md, json, csv,
        html, ncu). `force`: write into a non-empty directory that holds no previous report.
        `md`: report.md's layout, "compact" (details closed, for pull requests) or "full"."""
        from nsys_llm_explainer.render import Format, output, writers

        chosen = Format.parse(formats if isinstance(formats, str) else ",".join(str(f) for f in formats))
        out = Path(out_dir)
        output.write(out, writers.files(self.shared.report, chosen, md, self.shared), force=force)
        return out


__all__ = ["Report", "explain"]
