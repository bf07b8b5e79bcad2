"""Rank and world size of Nsight Systems captures from NCCL's communicator set-up payloads."""

from __future__ import annotations

import json
import sqlite3
import struct
from pathlib import Path

from nsys_llm_explainer.api import explain
from nsys_llm_explainer.diff import compare
from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.render.json_writer import report_dict
from nsys_llm_explainer.trace.nsys.metadata import HEADER
from tests.fixtures.builder import gtid
from tests.fixtures.diff_workloads import workload

INIT_SCHEMA = 16_777_218  # as NCCL registers it: comm id (uint64), No. of ranks, Rank, CUDA device (int)
SCHEMAS_DDL = ("CREATE TABLE NVTX_PAYLOAD_SCHEMAS (domainId INTEGER, schemaId INTEGER, name TEXT, type INTEGER, "
               "flags INTEGER, numEntries INTEGER, payloadSize INTEGER, alignTo INTEGER)")
ENTRIES_DDL = ("CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER NOT NULL, schemaId INTEGER NOT NULL, "
               "idx INTEGER NOT NULL, flags INTEGER, type INTEGER, name TEXT, description TEXT, "
               "arrayOrUnionDetail INTEGER, offset INTEGER)")


def with_nccl_init(path: Path, communicators: list[tuple[int, int]], as_json: bool = False) -> Path:
    """Add the payload schema of ncclCommInitRank and one set-up event per (world, rank)."""
    con = sqlite3.connect(path)
    con.execute(SCHEMAS_DDL)
    con.execute(ENTRIES_DDL)
    con.execute("INSERT INTO NVTX_PAYLOAD_SCHEMAS VALUES (1, ?, NULL, 1, NULL, 4, 24, NULL)", (INIT_SCHEMA,))
    con.executemany(
        "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (1, ?, ?, NULL, ?, ?, NULL, NULL, ?)",
        [(INIT_SCHEMA, 0, 18, "NCCL communicator ID", None), (INIT_SCHEMA, 1, 5, "No. of ranks", 8),
         (INIT_SCHEMA, 2, 5, "Rank", 12), (INIT_SCHEMA, 3, 5, "CUDA device", 16)])
    for i, (world, rank) in enumerate(communicators):
        payload = struct.pack("<Qiii", 0xC0FFEE + i, world, rank, rank % 8) + b"\0" * 4
        blob = HEADER.pack(1, 0, INIT_SCHEMA, 0, len(payload), HEADER.size + len(payload)) + payload
        text = json.dumps({"NCCL communicator ID": 1, "No. of ranks": world, "Rank": rank})
        con.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId, binaryData, jsonText) "
                    "VALUES (?, ?, 59, 'ncclCommInitRank', ?, 1, ?, ?)",
                    (10 + i, 20 + i, gtid(100, 100), None if as_json else blob, text if as_json else None))
    con.commit()
    con.close()
    return path


def test_world_is_the_largest_communicator(tmp_path: Path) -> None:
    # a tensor-parallel group of 2 (rank 1 in it) inside a job of 8 (rank 3)
    path = with_nccl_init(workload(tmp_path / "w.sqlite", version="2026.2"), [(2, 1), (8, 3)])
    assert explain(path).trace.distributed == {"rank": 3, "world_size": 8, "backend": "nccl"}


def test_payload_exported_as_json_text(tmp_path: Path) -> None:
    path = with_nccl_init(workload(tmp_path / "w.sqlite", version="2026.2"), [(4, 2)], as_json=True)
    assert explain(path).trace.distributed == {"rank": 2, "world_size": 4, "backend": "nccl"}


def test_no_payload_no_rank(tmp_path: Path) -> None:
    assert explain(workload(tmp_path / "w.sqlite", version="2026.2")).trace.distributed is None


def test_captures_of_different_jobs_are_not_comparable(tmp_path: Path) -> None:
    a = with_nccl_init(workload(tmp_path / "a.sqlite", version="2026.2"), [(8, 3)])
    b = with_nccl_init(workload(tmp_path / "b.sqlite", version="2026.2"), [(2, 1)])
    docs = [report_dict(explain(p)) for p in (a, b)]
    comp = compare(Side("a", "trace", docs[0], "BASE"), Side("b", "trace", docs[1], "NEW")).doc["comparability"]
    assert comp["comparable"] is False
    assert comp["reasons"] == ["different jobs: world size 8 vs 2 (rank 3 of 8 vs rank 1 of 2)"]
