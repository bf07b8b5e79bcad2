"""How an Nsight Systems capture was launched and what it spans: the command line
(META_DATA_CAPTURE's COMMAND and ARGUMENT rows only: never its environment, working
directory, user or host rows), process names (PROCESSES), how long the whole capture ran
(ANALYSIS_DETAILS), a window cut from it afterwards (META_DATA_EXPORT's DERIVED_WINDOW_NS,
"start-end" in ns) and the capture's start delay and trigger (META_DATA_CAPTURE
START_DELAY_MS, START_TRIGGER).

The command line is private: analysis/program.py reads it to name the program and the
model, and shows nothing else. Each query is a constant; table names are fixed.
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING

from nsys_llm_explainer.trace.data import CaptureSpan, CommandLine
from nsys_llm_explainer.trace.nsys import ids
from nsys_llm_explainer.trace.nsys.probe import CAPTURE_META_TABLE

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.nsys.load import NsysTraceData

PROCESSES_TABLE = "PROCESSES"
ANALYSIS_TABLE = "ANALYSIS_DETAILS"
EXPORT_META_TABLE = "META_DATA_EXPORT"
COMMAND_SQL = (
    f"SELECT name, value FROM {CAPTURE_META_TABLE} WHERE name GLOB 'PROCESS_*:COMMAND' "
    "OR name GLOB 'PROCESS_*:ARGUMENT_*' OR name GLOB 'PROCESS_*:PID' ORDER BY rowid"
)
PROCESS_SQL = f"SELECT globalPid, name FROM {PROCESSES_TABLE}"
ANALYSIS_SQL = f"SELECT duration, startTime, stopTime FROM {ANALYSIS_TABLE} LIMIT 1"
CUT_SQL = f"SELECT value FROM {EXPORT_META_TABLE} WHERE name = 'DERIVED_WINDOW_NS' LIMIT 1"
START_SQL = (
    f"SELECT name, value FROM {CAPTURE_META_TABLE} WHERE name IN ('START_DELAY_MS', 'START_TRIGGER')"
)
_ARG = re.compile(r"^(PROCESS_\d+):ARGUMENT_(\d+)$")
_WINDOW = re.compile(r"^\s*(\d{1,19})\s*-\s*(\d{1,19})\s*$")
_TRIGGER = re.compile(r"^[A-Za-z][A-Za-z ]{0,39}$")  # a setting's name, never free text
MAX_ARGS = 200
MAX_ARG_CHARS = 4096


def _rows(data: NsysTraceData, table: str, sql: str, *columns: str) -> list[tuple[object, ...]]:
    if not data.schema.has(table, *columns):
        return []
    try:
        return list(data.query(sql))
    except sqlite3.DatabaseError:
        return []


def command_lines(data: NsysTraceData) -> list[CommandLine]:
    """One command line per launched process the capture records, in its order."""
    commands: dict[str, str] = {}
    args: dict[str, dict[int, str]] = {}
    pids: dict[str, int] = {}
    for name, value in _rows(data, CAPTURE_META_TABLE, COMMAND_SQL, "name", "value"):
        if not isinstance(name, str) or not isinstance(value, str | int):
            continue
        proc, _, key = name.partition(":")
        text = str(value)[:MAX_ARG_CHARS]
        if key == "COMMAND":
            commands[proc] = text
        elif key == "PID":
            pids[proc] = int(value) if isinstance(value, int) or text.isdigit() else 0
        elif (m := _ARG.match(name)) and int(m.group(2)) < MAX_ARGS:
            args.setdefault(proc, {})[int(m.group(2))] = text
    out = []
    for proc, command in commands.items():
        argv = (command, *(v for _, v in sorted(args.get(proc, {}).items())))
        out.append(CommandLine(pids.get(proc) or None, argv, CAPTURE_META_TABLE))
    return out


def process_names(data: NsysTraceData, pids: list[int]) -> dict[int, str]:
    wanted = set(pids)
    out: dict[int, str] = {}
    for gpid, name in _rows(data, PROCESSES_TABLE, PROCESS_SQL, "globalPid", "name"):
        if isinstance(gpid, int) and isinstance(name, str) and (pid := ids.pid_of(gpid)) in wanted:
            out.setdefault(pid, name[:MAX_ARG_CHARS])
    return out


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def capture_span(data: NsysTraceData) -> CaptureSpan | None:
    rows = _rows(data, ANALYSIS_TABLE, ANALYSIS_SQL, "duration", "startTime", "stopTime")
    duration, start, stop = (_int(v) for v in rows[0]) if rows else (None, None, None)
    cut = None
    for (value,) in _rows(data, EXPORT_META_TABLE, CUT_SQL, "name", "value"):
        m = _WINDOW.match(str(value))
        if m and int(m.group(1)) < int(m.group(2)):
            cut = (int(m.group(1)), int(m.group(2)))
    delay, trigger = 0, None
    for name, value in _rows(data, CAPTURE_META_TABLE, START_SQL, "name", "value"):
        text = str(value).strip()
        if name == "START_DELAY_MS" and text.isdigit():
            delay = int(text) * 1_000_000
        elif name == "START_TRIGGER" and _TRIGGER.match(text) and text.lower() not in ("immediate", "delayed"):
            trigger = text
    if duration is None and cut is None and not delay and trigger is None:
        return None
    return CaptureSpan(duration, start, stop, cut, f"{EXPORT_META_TABLE}.DERIVED_WINDOW_NS" if cut else None,
                       delay, trigger)
