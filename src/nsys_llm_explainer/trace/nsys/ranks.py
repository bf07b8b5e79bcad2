"""Rank and world size of an Nsight Systems capture, where the capture records them.

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
"""

from __future__ import annotations

import json
import sqlite3
import struct
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsys_llm_explainer.trace.nsys.export import NsysExport

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


def _from_mpi(data: NsysExport) -> dict[str, Any] | None:
    if not data.schema.has(MPI_RANKS, "rank"):
        return None
    ranks = sorted({int(r) for (r,) in data.query(f"SELECT DISTINCT rank FROM {MPI_RANKS}") if isinstance(r, int)})
    if not ranks:
        return None
    every = ranks == list(range(len(ranks))) and len(ranks) > 1
    return {"rank": ranks[0] if len(ranks) == 1 else None, "world_size": len(ranks) if every else None,
            "backend": "mpi"}


def read(data: NsysExport) -> dict[str, Any] | None:
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
