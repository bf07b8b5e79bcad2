"""Open an Nsight Systems SQLite export as TraceData (read-only, probed, helpers started)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.model import Schema
from nsys_llm_explainer.trace.nsys import helper
from nsys_llm_explainer.trace.nsys import open as trace_open
from nsys_llm_explainer.trace.nsys.fetch import Progress
from nsys_llm_explainer.trace.nsys.load import NsysTraceData
from nsys_llm_explainer.trace.nsys.probe import describe, looks_like_nsys, probe


def open_export(path: Path) -> tuple[sqlite3.Connection, Schema]:
    """Open and probe; InputError when the file is not a usable Nsight Systems export."""
    trace_open.check_input_file(path)
    conn = trace_open.connect_readonly(path)
    try:
        schema = probe(conn)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise InputError(
            f"{path}: cannot read its schema ({exc}); export the capture again"
        ) from None
    if not looks_like_nsys(schema):
        conn.close()
        what = "has no tables" if not schema.tables else "has none of the Nsight Systems tables"
        raise InputError(
            f"{path}: is a SQLite database but not an Nsight Systems export ({what}); "
            "pass the file written by `nsys export --type sqlite`"
        )
    return conn, schema


def open_nsys(
    path: Path, kernel_name: str = "demangled", progress: Progress | None = None, jobs: int = 1
) -> NsysTraceData:
    conn, schema = open_export(path)
    data = NsysTraceData(conn, schema, kernel_name=kernel_name, progress=progress)
    try:
        data.helpers = helper.start_helpers(conn, schema, jobs)
    except BaseException:
        data.close()
        raise
    return data


def describe_export(path: Path) -> str:
    """--print-schema for an export: its tables, their columns and row counts."""
    conn, schema = open_export(path)
    try:
        return describe(schema, NsysTraceData(conn, schema).table_counts())
    finally:
        conn.close()
