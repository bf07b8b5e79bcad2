"""What an Nsight Systems export says about itself: enum labels, the CUDA-graph trace mode,
the exporter's diagnostics. Each query is a constant; table names are fixed, never taken
from the trace."""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING

from nsys_llm_explainer.trace.data import ClockOrigin, Diagnostic, Unavailable
from nsys_llm_explainer.trace.nsys.probe import CAPTURE_META_TABLE, GPU_TABLE

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.nsys.export import NsysExport

ENUM_TABLES = {"copy": "ENUM_CUDA_MEMCPY_OPER", "mem": "ENUM_CUDA_MEM_KIND"}
ENUM_SQL = {
    "copy": "SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER",
    "mem": "SELECT id, name FROM ENUM_CUDA_MEM_KIND",
}
# Only the CUDA-graph trace mode row, plain or per process ("PROCESS_0:CUDA_GRAPH_...").
MODE_SQL = (
    f"SELECT value FROM {CAPTURE_META_TABLE} "
    "WHERE name = 'CUDA_GRAPH_TRACE_OPTIONS:MODE' OR name GLOB "
    "'PROCESS_*:CUDA_GRAPH_TRACE_OPTIONS:MODE'"
)
KNOWN_MODES = ("graph", "node")
SESSION_TABLE = "TARGET_INFO_SESSION_START_TIME"
SESSION_SQL = f"SELECT utcEpochNs FROM {SESSION_TABLE} WHERE typeof(utcEpochNs) = 'integer' LIMIT 2"
DIAGNOSTIC_TABLE = "DIAGNOSTIC_EVENT"
DIAGNOSTIC_SQL = (
    f"SELECT timestamp, severity, text FROM {DIAGNOSTIC_TABLE} "
    "WHERE severity IN (2, 3) ORDER BY timestamp LIMIT 200"
)
SEVERITIES = {2: "warning", 3: "error"}  # ENUM_DIAGNOSTIC_SEVERITY_LEVEL; info is not kept
MAX_DIAGNOSTIC_CHARS = 200
# Paths name users and hosts (/home/alice/..., /tmp/nvidia/.../pid_42_stdout.log): never shown.
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s'\"/\\]+){2,}[/\\]?")


def gpus_missing_reason(data: NsysExport) -> str:
    if GPU_TABLE not in data.schema.tables:
        return f"the export has no {GPU_TABLE} table, so the GPU models are unknown"
    return f"{GPU_TABLE} has no usable rows, so the GPU models are unknown"


def enum_labels(data: NsysExport, which: str) -> dict[int, str] | None:
    if ENUM_TABLES[which] not in data.schema.tables:
        return None
    try:
        rows = data.query(ENUM_SQL[which])
    except sqlite3.DatabaseError:
        return None
    found = {int(i): str(v) for i, v in rows if isinstance(i, int) and isinstance(v, str)}
    return found or None


def graph_trace_mode(data: NsysExport) -> str | None:
    """'graph', 'node', 'mixed' (processes differ), or None when not recorded."""
    if CAPTURE_META_TABLE not in data.schema.tables:
        return None
    try:
        values = {str(v).strip().lower() for (v,) in data.query(MODE_SQL)}
    except sqlite3.DatabaseError:
        return None
    values &= set(KNOWN_MODES)  # anything else is not echoed
    if not values:
        return None
    return values.pop() if len(values) == 1 else "mixed"


def clean_message(text: str) -> str:
    """First line of a diagnostic, paths replaced, bounded in length."""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    line = _PATH.sub("<path>", line)
    if len(line) > MAX_DIAGNOSTIC_CHARS:
        line = line[: MAX_DIAGNOSTIC_CHARS - 3] + "..."
    return line


def diagnostics(data: NsysExport) -> list[Diagnostic]:
    """Warnings and errors from DIAGNOSTIC_EVENT (Info lines are routine and not kept)."""
    if not data.schema.has(DIAGNOSTIC_TABLE, "timestamp", "severity", "text"):
        return []
    try:
        rows = data.query(DIAGNOSTIC_SQL)
    except sqlite3.DatabaseError:
        return []
    out: list[Diagnostic] = []
    for ts, sev, text in rows:
        if not isinstance(text, str) or sev not in SEVERITIES:
            continue
        msg = clean_message(text)
        if msg:
            out.append(Diagnostic(SEVERITIES[sev], msg, ts if isinstance(ts, int) else None))
    return out


def session_start(data: NsysExport) -> ClockOrigin:
    """Export timestamps count from the session start; utcEpochNs is that start on the
    capturing host's wall clock."""
    if not data.schema.has(SESSION_TABLE, "utcEpochNs"):
        raise Unavailable(f"the export has no {SESSION_TABLE} table")
    try:
        rows = data.query(SESSION_SQL)
    except sqlite3.DatabaseError as exc:
        raise Unavailable(f"{SESSION_TABLE} could not be read ({exc})") from None
    values = {int(v) for (v,) in rows}
    if len(values) != 1 or next(iter(values)) <= 0:
        raise Unavailable(f"{SESSION_TABLE} holds no single plausible utcEpochNs")
    return ClockOrigin(values.pop(), f"{SESSION_TABLE}.utcEpochNs")
