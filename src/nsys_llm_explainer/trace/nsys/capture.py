"""Capture metadata, read only with --include-capture-info, with secrets redacted.

By default nothing here runs: META_DATA_CAPTURE's working directories, environment variables
and host names are never read (trace/nsys/metadata.py reads the command line's COMMAND and
ARGUMENT rows and the PROCESSES names, only to name the program). When the user asks for
them, values of variables and command-line flags whose names look secret are replaced by
REDACTED, and so is the password part of any URL.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from nsys_llm_explainer.model import Schema
from nsys_llm_explainer.trace.nsys import ids
from nsys_llm_explainer.trace.nsys.probe import CAPTURE_META_TABLE, quote_ident

REDACTED = "<redacted>"
PROCESSES_TABLE = "PROCESSES"
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
PROCESS_SQL = "SELECT globalPid, name FROM {table}"


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
) -> dict[str, Any]:
    """Process names (for `pids`), capture settings, command line and environment, redacted."""
    settings: list[dict[str, str]] = []
    env: list[dict[str, str]] = []
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
) -> list[dict[str, Any]]:
    if not pids or not schema.has(PROCESSES_TABLE, "globalPid", "name"):
        return []
    wanted = set(pids)
    names: dict[int, str] = {}
    sql = PROCESS_SQL.format(table=quote_ident(PROCESSES_TABLE))
    for gpid, name in conn.execute(sql):
        if isinstance(gpid, int) and isinstance(name, str):
            pid = ids.pid_of(gpid)
            if pid in wanted:
                names.setdefault(pid, scrub(name))
    return [{"pid": p, "name": names.get(p)} for p in sorted(wanted)]
