"""What an Nsight Systems export says about itself and its capture.

About itself: enum labels, the CUDA-graph trace mode, the exporter's diagnostics. Each
query is a constant; table names are fixed, never taken from the trace.

How an Nsight Systems capture was launched and what it spans: the command line
(META_DATA_CAPTURE's COMMAND and ARGUMENT rows only: never its environment, working
directory, user or host rows), process names (PROCESSES), how long the whole capture ran
(ANALYSIS_DETAILS), a window cut from it afterwards (META_DATA_EXPORT's DERIVED_WINDOW_NS,
"start-end" in ns) and the capture's start delay and trigger (META_DATA_CAPTURE
START_DELAY_MS, START_TRIGGER).

The command line is private: analysis/program.py reads it to name the program and the
model, and shows nothing else. Each query is a constant; table names are fixed.

Rank and world size of the capture (read_ranks), where the capture records them:

1. NCCL (2.19 and later) annotates `ncclCommInitRank` (and the other communicator
   constructors) with an NVTX payload whose schema (NVTX_PAYLOAD_SCHEMAS and
   NVTX_PAYLOAD_SCHEMA_ENTRIES) has the entries "No. of ranks" and "Rank". Nsight Systems
   exports the payload in NVTX_EVENTS.binaryData: a 32-byte header (format, flags, schema id,
   reserved, payload size, total size, little endian) and the payload, the entries at their
   schema offsets; some versions export it as JSON text instead (jsonText / jsonTextId). The
   world is the largest communicator (tensor- or pipeline-parallel groups are smaller); the
   rank is this process's rank in it, when the capture holds one process.
2. MPI tracing (`--trace=mpi`) writes MPI_RANKS (rank per thread): the rank is read; the
   world size only when the capture holds every rank.

Nothing else (environment variables, command lines) is read for this.

Capture metadata (read_capture_info), read only with --include-capture-info, with secrets
redacted. By default it is never read: META_DATA_CAPTURE's working directories, environment
variables and host names stay unread (command_lines reads the command line's COMMAND and
ARGUMENT rows and the PROCESSES names, only to name the program). When the user asks for
them, values of variables and command-line flags whose names look secret are replaced by
REDACTED, and so is the password part of any URL."""

from __future__ import annotations

import json
import re
import sqlite3
import struct
from typing import Any

from nsys_llm_explainer.model import CaptureInfo, Distributed, EnvironmentVariable, ProcessName, Schema, Setting
from nsys_llm_explainer.trace.data import CaptureSpan, ClockOrigin, CommandLine, Diagnostic, Unavailable
from nsys_llm_explainer.trace.nsys.export import NsysExport, pid_of
from nsys_llm_explainer.trace.nsys.probe import CAPTURE_META_TABLE, GPU_TABLE, quote_ident

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


def _rows(data: NsysExport, table: str, sql: str, *columns: str) -> list[tuple[object, ...]]:
    if not data.schema.has(table, *columns):
        return []
    try:
        return list(data.query(sql))
    except sqlite3.DatabaseError:
        return []


def command_lines(data: NsysExport) -> list[CommandLine]:
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


def process_names(data: NsysExport, pids: list[int]) -> dict[int, str]:
    wanted = set(pids)
    out: dict[int, str] = {}
    for gpid, name in _rows(data, PROCESSES_TABLE, PROCESS_SQL, "globalPid", "name"):
        if isinstance(gpid, int) and isinstance(name, str) and (pid := pid_of(gpid)) in wanted:
            out.setdefault(pid, name[:MAX_ARG_CHARS])
    return out


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def capture_span(data: NsysExport) -> CaptureSpan | None:
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


SCHEMAS = "NVTX_PAYLOAD_SCHEMAS"
ENTRIES = "NVTX_PAYLOAD_SCHEMA_ENTRIES"
EVENTS = "NVTX_EVENTS"
MPI_RANKS = "MPI_RANKS"
HEADER = struct.Struct("<IIIIQQ")
NRANKS, RANK = "No. of ranks", "Rank"
# NVTX payload entry types (nvToolsExtPayload.h) -> struct code
ENTRY_TYPES = {1: "b", 2: "B", 3: "h", 4: "H", 5: "i", 6: "I", 7: "q", 8: "Q", 9: "q", 10: "Q",
               11: "b", 12: "B", 13: "h", 14: "H", 15: "i", 16: "I", 17: "q", 18: "Q"}
MAX_EVENTS = 10_000  # payload events read: communicator set-up is a handful of calls
PID_SHIFT, PID_MASK = 24, 0xFFFFFF


def _rank_layouts(data: NsysExport) -> dict[int, tuple[tuple[int, str], tuple[int, str]]]:
    """schema id -> ((offset, code) of "No. of ranks", (offset, code) of "Rank")."""
    if not data.schema.has(ENTRIES, "schemaId", "idx", "type", "name", "offset"):
        return {}
    rows = data.query(f"SELECT schemaId, idx, type, name, offset FROM {ENTRIES} ORDER BY schemaId, idx")
    by_schema: dict[int, list[tuple[int, int, str, int | None]]] = {}
    for sid, idx, typ, name, off in rows:
        if isinstance(sid, int) and isinstance(idx, int):
            by_schema.setdefault(sid, []).append((idx, typ, str(name or ""), off))
    out = {}
    for sid, entries in by_schema.items():
        pos: dict[str, tuple[int, str]] = {}
        at = 0
        for idx, typ, name, off in entries:
            code = ENTRY_TYPES.get(typ) if isinstance(typ, int) else None
            if code is None:
                break  # an entry of unknown size: later offsets cannot be computed
            size = struct.calcsize(code)
            at = off if isinstance(off, int) else (0 if idx == 0 else -(-at // size) * size)
            pos[name] = (at, code)
            at += size
        if NRANKS in pos and RANK in pos:
            out[sid] = (pos[NRANKS], pos[RANK])
    return out


def _from_payloads(data: NsysExport) -> list[tuple[int, int, int]]:
    """(pid, world, rank) of every decodable communicator set-up payload."""
    cols = data.schema.columns(EVENTS)
    if "globalTid" not in cols or not ({"binaryData", "jsonText"} & set(cols)):
        return []
    layouts = _rank_layouts(data)
    if not layouts:  # no communicator set-up schema: no event to scan for
        return []
    picks = [c for c in ("binaryData", "jsonText") if c in cols]
    where = " OR ".join(f"{c} IS NOT NULL" for c in picks)
    rows = data.query(f"SELECT globalTid, {', '.join(picks)} FROM {EVENTS} WHERE {where} LIMIT {MAX_EVENTS}")
    out = []
    for row in rows:
        pid = (int(row[0]) >> PID_SHIFT) & PID_MASK if isinstance(row[0], int) else -1
        values = dict(zip(picks, row[1:], strict=True))
        found = _decode(values.get("binaryData"), layouts) or _json(values.get("jsonText"))
        if found is not None:
            out.append((pid, *found))
    return out


def _decode(blob: Any, layouts: dict[int, tuple[tuple[int, str], tuple[int, str]]]) -> tuple[int, int] | None:
    if isinstance(blob, str):  # a blob written as hex text
        try:
            blob = bytes.fromhex(blob)
        except ValueError:
            return None
    if not isinstance(blob, bytes) or len(blob) < HEADER.size or not layouts:
        return None
    _, _, sid, _, size, _ = HEADER.unpack_from(blob)
    layout = layouts.get(sid)
    if layout is None:
        return None
    payload = blob[HEADER.size:HEADER.size + size]
    got = []
    for off, code in layout:
        if off < 0 or off + struct.calcsize(code) > len(payload):
            return None
        got.append(struct.unpack_from("<" + code, payload, off)[0])
    world, rank = got
    return (world, rank) if 0 < world <= 1 << 20 and 0 <= rank < world else None


def _json(text: Any) -> tuple[int, int] | None:
    if not isinstance(text, str) or NRANKS not in text:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    world, rank = (obj.get(NRANKS), obj.get(RANK)) if isinstance(obj, dict) else (None, None)
    if isinstance(world, int) and isinstance(rank, int) and 0 < world and 0 <= rank < world:
        return world, rank
    return None


def _from_mpi(data: NsysExport) -> Distributed | None:
    if not data.schema.has(MPI_RANKS, "rank"):
        return None
    ranks = sorted({int(r) for (r,) in data.query(f"SELECT DISTINCT rank FROM {MPI_RANKS}") if isinstance(r, int)})
    if not ranks:
        return None
    every = ranks == list(range(len(ranks))) and len(ranks) > 1
    return {"rank": ranks[0] if len(ranks) == 1 else None, "world_size": len(ranks) if every else None,
            "backend": "mpi"}


def read_ranks(data: NsysExport) -> Distributed | None:
    """{rank, world_size, backend} or None when the capture records neither."""
    try:
        found = _from_payloads(data)
        if found:
            world = max(w for _, w, _ in found)
            ranks = {(pid, r) for pid, w, r in found if w == world}
            pids = {pid for pid, _ in ranks}
            rank = next(iter(ranks))[1] if len(pids) == 1 and len(ranks) == 1 else None
            return {"rank": rank, "world_size": world, "backend": "nccl"}
        return _from_mpi(data)
    except (sqlite3.DatabaseError, struct.error, ValueError):
        return None


REDACTED = "<redacted>"
ENV_SETTING = "ENVIRONMENT_VARIABLE"
# Names that hint at credentials; matched anywhere in a variable or flag name, any case.
SECRET_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASS(WORD|WD|PHRASE)?|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|"
    r"CERT|SIGNATURE|SALT|DSN|CONNECTION_?STRING|BEARER|ACCESS",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*:)[^@\s/]+@")
# `--flag=value`, `-f=value` or `NAME=value` (as in `env NAME=value cmd`).
_ASSIGNMENT = re.compile(r"^(-{0,2}[A-Za-z0-9_.-]+)=(.*)$", re.DOTALL)

CAPTURE_SQL = "SELECT name, value FROM {table} ORDER BY rowid"
CAPTURE_PROCESS_SQL = "SELECT globalPid, name FROM {table}"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def scrub(value: str) -> str:
    """Remove passwords embedded in URLs (scheme://user:password@host)."""
    return _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + "@", value)


def parse_env(row: str) -> tuple[str, str]:
    """`NAME="VALUE"` (as nsys stores it) -> (NAME, VALUE)."""
    name, _, value = row.partition("=")
    if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
        value = value[1:-1]
    return name, value


def redact_env(name: str, value: str) -> str:
    return REDACTED if is_secret_name(name) else scrub(value)


def redact_arguments(args: list[str]) -> list[str]:
    """Command-line arguments with secret-looking flags' values redacted (--token=x, --token x)."""
    out: list[str] = []
    hide_next = False
    for arg in args:
        m = _ASSIGNMENT.match(arg)
        if hide_next and not arg.startswith("-"):
            out.append(REDACTED)
        elif m and is_secret_name(m.group(1)):
            out.append(m.group(1) + "=" + REDACTED)
        else:
            out.append(scrub(arg))
        hide_next = bool(arg.startswith("-") and not m and is_secret_name(arg))
    return out


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def read_capture_info(
    conn: sqlite3.Connection, schema: Schema, pids: list[int]
) -> CaptureInfo:
    """Process names (for `pids`), capture settings, command line and environment, redacted."""
    settings: list[Setting] = []
    env: list[EnvironmentVariable] = []
    args: dict[str, list[str]] = {}
    redacted = 0
    if schema.has(CAPTURE_META_TABLE, "name", "value"):
        sql = CAPTURE_SQL.format(table=quote_ident(CAPTURE_META_TABLE))
        for raw_name, raw_value in conn.execute(sql):
            name, value = _text(raw_name), _text(raw_value)
            if name.endswith(ENV_SETTING):
                var, val = parse_env(value)
                shown = redact_env(var, val)
                redacted += shown != val
                env.append({"process": name.split(":", 1)[0], "name": var, "value": shown})
            elif ":ARGUMENT_" in name:
                args.setdefault(name.split(":", 1)[0], []).append(value)
            else:
                shown = REDACTED if is_secret_name(name) else scrub(value)
                redacted += shown != value
                settings.append({"name": name, "value": shown})
    for proc, values in args.items():
        shown_args = redact_arguments(values)
        redacted += sum(a != b for a, b in zip(values, shown_args, strict=True))
        settings.append({"name": f"{proc}:ARGUMENTS", "value": " ".join(shown_args)})
    return {
        "processes": _process_names(conn, schema, pids),
        "settings": settings,
        "environment": env,
        "redacted_values": int(redacted),
    }


def _process_names(
    conn: sqlite3.Connection, schema: Schema, pids: list[int]
) -> list[ProcessName]:
    if not pids or not schema.has(PROCESSES_TABLE, "globalPid", "name"):
        return []
    wanted = set(pids)
    names: dict[int, str] = {}
    sql = CAPTURE_PROCESS_SQL.format(table=quote_ident(PROCESSES_TABLE))
    for gpid, name in conn.execute(sql):
        if isinstance(gpid, int) and isinstance(name, str):
            pid = pid_of(gpid)
            if pid in wanted:
                names.setdefault(pid, scrub(name))
    return [{"pid": p, "name": names.get(p)} for p in sorted(wanted)]
