"""The report model: plain frozen dataclasses shared by metrics, rules and writers."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import pandas as pd


class Severity(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"

    @property
    def rank(self) -> int:
        return {"high": 0, "medium": 1, "low": 2}[self.value]


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True)
class Schema:
    """What the schema probe found in the export. Only real tables (not views) count."""

    tables: dict[str, tuple[str, ...]]
    kernel_table: str | None
    meta_table: str | None
    nsys_version: str | None
    export_schema_version: str | None
    warnings: tuple[str, ...] = ()

    def has(self, table: str | None, *columns: str) -> bool:
        if table is None or table not in self.tables:
            return False
        return all(c in self.tables[table] for c in columns)

    def columns(self, table: str) -> tuple[str, ...]:
        return self.tables.get(table, ())


@dataclass(frozen=True)
class Table:
    """A CSV table: `frame` holds the rows; columns are fixed so empty tables keep a header."""

    name: str
    columns: tuple[str, ...]
    frame: pd.DataFrame | None = None

    def rows(self) -> pd.DataFrame:
        if self.frame is None:
            return pd.DataFrame({c: pd.Series(dtype="object") for c in self.columns})
        return self.frame.loc[:, list(self.columns)]


@dataclass(frozen=True)
class MetricResult:
    """A metric that ran. `data` is JSON-ready and becomes report.json `metrics.<id>`."""

    metric_id: str
    data: dict[str, Any]
    tables: tuple[Table, ...] = ()
    notes: tuple[str, ...] = ()
    status: str = field(default="ok", init=False)


@dataclass(frozen=True)
class Skipped:
    """A metric that could not run, and why. Every writer shows the reason."""

    metric_id: str
    reason: str
    status: str = field(default="skipped", init=False)


Outcome = MetricResult | Skipped


@dataclass(frozen=True)
class Finding:
    rule_id: str
    title: str
    severity: Severity
    confidence: Confidence
    evidence: tuple[str, ...]
    recommendation: tuple[str, ...]
    metric_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class GpuInfo:
    device_id: int
    name: str | None
    sm_count: int | None = None
    total_memory_bytes: int | None = None
    memory_bandwidth_bytes_per_s: int | None = None
    clock_hz: int | None = None


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    kernel_count: int
    name: str | None = None  # only with --include-capture-info


@dataclass(frozen=True)
class TraceInfo:
    path: str
    size_bytes: int
    nsys_version: str | None
    export_schema_version: str | None
    gpus: tuple[GpuInfo, ...]
    processes: tuple[ProcessInfo, ...]
    window_start_ns: int | None
    window_end_ns: int | None
    tables: dict[str, int]  # core tables found -> row count
    format: str = "nsys-sqlite"  # which source read the file: "nsys-sqlite" or "kineto-json"
    kineto: dict[str, Any] | None = None  # a Kineto trace's version fields (schemaVersion ...)
    distributed: dict[str, Any] | None = None  # rank, world_size, backend when recorded


@dataclass(frozen=True)
class Report:
    trace: TraceInfo
    metrics: dict[str, Outcome]
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...]
    limitations: tuple[str, ...]
    options: dict[str, Any]
    capture_info: dict[str, Any] | None = None

    def ok(self, metric_id: str) -> MetricResult | None:
        outcome = self.metrics.get(metric_id)
        return outcome if isinstance(outcome, MetricResult) else None
