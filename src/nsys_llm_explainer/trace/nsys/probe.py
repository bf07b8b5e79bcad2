"""Schema probe: which tables and columns this export has, and which nsys wrote it."""

from __future__ import annotations

import sqlite3

from nsys_llm_explainer.model import Schema

KERNEL_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL")
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
STRINGS_TABLE = "StringIds"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
GRAPH_TRACE_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"  # CUDA graphs traced whole
GPU_TABLE = "TARGET_INFO_GPU"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
CAPTURE_META_TABLE = "META_DATA_CAPTURE"

# Tables whose presence marks a file as an Nsight Systems export.
NSYS_MARKERS = (
    *KERNEL_TABLES,
    RUNTIME_TABLE,
    NVTX_TABLE,
    STRINGS_TABLE,
    GPU_TABLE,
    *META_TABLES,
    "TARGET_INFO_SESSION_START_TIME",
    "ThreadNames",
    "ProcessStreams",
)
CORE_TABLES = (
    *KERNEL_TABLES,
    RUNTIME_TABLE,
    NVTX_TABLE,
    STRINGS_TABLE,
    MEMCPY_TABLE,
    MEMSET_TABLE,
    SYNC_TABLE,
    GRAPH_TRACE_TABLE,
    GPU_TABLE,
    *META_TABLES,
)

LIST_TABLES_SQL = "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
LIST_VIEWS_SQL = "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name"
VERSION_KEYS = ("EXPORT_PRODUCT_VERSION", "EXPORT_SCHEMA_VERSION")


def quote_ident(name: str) -> str:
    """Quote an identifier that came from the probed schema (never from user text)."""
    return '"' + name.replace('"', '""') + '"'


def probe(conn: sqlite3.Connection) -> Schema:
    names = [row[0] for row in conn.execute(LIST_TABLES_SQL)]
    tables: dict[str, tuple[str, ...]] = {}
    for name in names:
        if not isinstance(name, str) or name.startswith("sqlite_"):
            continue
        cols = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({quote_ident(name)})"))
        tables[name] = cols
    kernel_table = next((t for t in KERNEL_TABLES if t in tables), None)
    meta_table = next((t for t in META_TABLES if t in tables), None)
    versions: dict[str, str] = {}
    warnings: list[str] = []
    if meta_table is not None and {"name", "value"} <= set(tables[meta_table]):
        # Only the two version rows are read: the other rows hold host and user names.
        placeholders = ",".join("?" for _ in VERSION_KEYS)
        sql = f"SELECT name, value FROM {quote_ident(meta_table)} WHERE name IN ({placeholders})"
        for key, value in conn.execute(sql, VERSION_KEYS):
            if isinstance(value, str):
                versions[key] = value
    elif tables:
        warnings.append(
            "no export metadata table: nsys version unknown (exports before 2022 lack it)"
        )
    warnings.extend(
        f"{name} is a view, not a table: ignored (only real tables are read)"
        for (name,) in conn.execute(LIST_VIEWS_SQL)
        if name in NSYS_MARKERS or name in CORE_TABLES
    )
    return Schema(
        tables=tables,
        kernel_table=kernel_table,
        meta_table=meta_table,
        nsys_version=versions.get("EXPORT_PRODUCT_VERSION"),
        export_schema_version=versions.get("EXPORT_SCHEMA_VERSION"),
        warnings=tuple(warnings),
    )


def looks_like_nsys(schema: Schema) -> bool:
    return any(t in schema.tables for t in NSYS_MARKERS)


def describe(schema: Schema, row_counts: dict[str, int]) -> str:
    """Text for --print-schema: the core tables, their columns and row counts."""
    lines = [
        f"nsys version: {schema.nsys_version or 'unknown'}",
        f"export schema version: {schema.export_schema_version or 'unknown'}",
        f"kernel table: {schema.kernel_table or 'none'}",
        f"metadata table: {schema.meta_table or 'none'}",
        "core tables:",
    ]
    for table in CORE_TABLES:
        if table in schema.tables:
            cols = ", ".join(schema.tables[table])
            lines.append(f"  {table} ({row_counts.get(table, 0)} rows): {cols}")
        else:
            lines.append(f"  {table}: absent")
    others = sorted(t for t in schema.tables if t not in CORE_TABLES)
    lines.append(f"other tables ({len(others)}): {', '.join(others)}")
    return "\n".join(lines)
