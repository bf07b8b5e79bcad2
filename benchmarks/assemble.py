"""Turn simulated steps into table columns, and compute the totals the tool must reproduce.

Steps that share a template have the same shape, so each (process, template) pair becomes
2-D arrays (steps x events) and every table column is one fancy-index of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from benchmarks import catalog as cat
from benchmarks.catalog import Ev
from benchmarks.timeline import MAIN_STREAM, StepOut, Template
from benchmarks.writer import Value
from tests.fixtures.builder import TraceBuilder, gpid, gtid

if TYPE_CHECKING:
    from benchmarks.synth import SynthConfig

GRAPH_NODE_BASE = 7_000  # graphNodeId of node 0; nsys ids are opaque integers
GRAPH_ID = 3
REGISTERED_NVTX = ("prefill", "decode_step")  # nvtxDomainRegisterString -> textId
MEM_PINNED, MEM_DEVICE = 1, 2  # ENUM_CUDA_MEM_KIND
COPY_H2D, COPY_D2H = 1, 2  # ENUM_CUDA_MEMCPY_OPER
SYNC_STREAM = 3  # ENUM_CUPTI_SYNC_TYPE


class Rows:
    """Per-template step outputs of one process."""

    def __init__(self, index: int, pid: int, templates: tuple[Template, ...]) -> None:
        self.index = index
        self.pid = pid
        self.templates = templates
        self.steps: list[list[StepOut]] = [[] for _ in templates]
        self.corr: list[list[int]] = [[] for _ in templates]

    def add(self, template: int, out: StepOut, corr_base: int) -> None:
        self.steps[template].append(out)
        self.corr[template].append(corr_base)


@dataclass
class Tables:
    items: dict[str, tuple[dict[str, Value], frozenset[str]]] = field(default_factory=dict)
    expected: dict[str, object] = field(default_factory=dict)


def _cat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    keys = parts[0].keys()
    cols = {k: np.concatenate([p[k] for p in parts]) for k in keys}
    order = np.argsort(cols["start"], kind="stable")
    return {k: v[order] for k, v in cols.items()}


def _mangled(name: str) -> str:
    short = cat.short_of(name)
    return f"_Z{len(short)}{short}v"


def _pieces(b: TraceBuilder, rows: Rows) -> dict[str, list[dict[str, np.ndarray]]]:
    out: dict[str, list[dict[str, np.ndarray]]] = {"k": [], "rt": [], "nv": [], "mc": [], "sy": []}
    for tix, t in enumerate(rows.templates):
        steps = rows.steps[tix]
        if not steps:
            continue
        es = np.stack([s.ev_start for s in steps])
        ee = np.stack([s.ev_end for s in steps])
        os_ = np.stack([s.op_start for s in steps])
        oe = np.stack([s.op_end for s in steps])
        corr0 = np.array(rows.corr[tix], dtype=np.int64)[:, None]
        nsteps = len(steps)
        api_pos = np.full(len(t.ev), -1, dtype=np.int64)
        api_pos[t.api_events] = np.arange(len(t.api_events))
        op_corr = corr0 + api_pos[t.op_event][None, :]
        kix = np.array([i for i, k in enumerate(t.op_kernel) if k], dtype=np.int64)
        cix = np.array([i for i, k in enumerate(t.op_kernel) if not k], dtype=np.int64)

        def tile(a: np.ndarray, n: int = nsteps) -> np.ndarray:
            return np.tile(a, n)

        names = [t.op_kernel[i] for i in kix]
        node = t.op_node[kix]
        out["k"].append({
            "start": os_[:, kix].ravel(), "end": oe[:, kix].ravel(),
            "stream": tile(t.op_stream[kix]), "corr": op_corr[:, kix].ravel(),
            "name": tile(np.array([b.string(n) for n in names])),
            "short": tile(np.array([b.string(cat.short_of(n)) for n in names])),
            "mangled": tile(np.array([b.string(_mangled(n)) for n in names])),
            "grid": tile(np.array([cat.KERNELS[n].grid for n in names])),
            "block": tile(np.array([cat.KERNELS[n].block for n in names])),
            "regs": tile(np.array([cat.KERNELS[n].registers for n in names])),
            "node": tile(np.where(node >= 0, GRAPH_NODE_BASE + node, -1)),
            "graph": tile(np.where(node >= 0, GRAPH_ID, -1)),
            "inside": tile(t.op_inside[kix]),
        })
        api_names = [cat.API_NAMES[Ev(int(t.ev[i]))] for i in t.api_events]
        out["rt"].append({
            "start": es[:, t.api_events].ravel(), "end": ee[:, t.api_events].ravel(),
            "corr": (corr0 + np.arange(len(t.api_events))[None, :]).ravel(),
            "name": tile(np.array([b.string(n) for n in api_names])),
        })
        reg = np.array([n in REGISTERED_NVTX for n in t.range_name])
        out["nv"].append({
            "start": es[:, t.pushes].ravel(), "end": ee[:, t.pops].ravel(),
            "text_id": tile(np.array([b.string(n) if r else -1
                                      for n, r in zip(t.range_name, reg, strict=True)])),
            "text": tile(np.array(
                [None if r else n for n, r in zip(t.range_name, reg, strict=True)], dtype=object)),
        })
        h2d = t.ev[t.op_event[cix]] == Ev.H2D
        out["mc"].append({
            "start": os_[:, cix].ravel(), "end": oe[:, cix].ravel(),
            "corr": op_corr[:, cix].ravel(),
            "kind": tile(np.where(h2d, COPY_H2D, COPY_D2H)),
            "bytes": tile(np.where(h2d, cat.H2D_BYTES, cat.D2H_BYTES)),
            "src": tile(np.where(h2d, MEM_PINNED, MEM_DEVICE)),
            "dst": tile(np.where(h2d, MEM_DEVICE, MEM_PINNED)),
        })
        s = t.sync_at
        out["sy"].append({"start": es[:, s] + 200, "end": ee[:, s] - 200,
                          "corr": corr0[:, 0] + api_pos[s]})
    return out


def _busy(start: np.ndarray, end: np.ndarray) -> int:
    """Union length by a running frontier over start-sorted intervals (independent of merge)."""
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    frontier = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(e)[:-1]]
    return int(np.maximum(e - np.maximum(s, frontier), 0).sum())


def assemble(b: TraceBuilder, cfg: SynthConfig, procs: list[Rows]) -> Tables:
    tables = Tables()
    kernels, busy, attributed, kernel_ns = [], {}, 0, 0
    per: dict[str, list[dict[str, np.ndarray]]] = {"k": [], "rt": [], "nv": [], "mc": [], "sy": []}
    for rows in procs:
        pieces = _pieces(b, rows)
        ident = {"device": rows.index, "gpid": gpid(rows.pid), "gtid": gtid(rows.pid, rows.pid)}
        for key, parts in pieces.items():
            for part in parts:
                n = len(part["start"])
                part.update({k: np.full(n, v, dtype=np.int64) for k, v in ident.items()})
            per[key] += parts
        k = _cat(pieces["k"])
        dur = k["end"] - k["start"]
        busy[str(rows.index)] = _busy(k["start"], k["end"])
        kernel_ns += int(dur.sum())
        attributed += int(dur[k["inside"]].sum())
        kernels.append(len(dur))
    k, rt, nv, mc, sy = (_cat(per[x]) for x in ("k", "rt", "nv", "mc", "sy"))
    tables.items["CUPTI_ACTIVITY_KIND_KERNEL"] = ({
        "start": k["start"], "end": k["end"], "deviceId": k["device"], "contextId": 1,
        "streamId": k["stream"], "correlationId": k["corr"], "globalPid": k["gpid"],
        "demangledName": k["name"], "shortName": k["short"], "mangledName": k["mangled"],
        "launchType": 1, "cacheConfig": 0, "registersPerThread": k["regs"],
        "gridX": k["grid"], "gridY": 1, "gridZ": 1, "blockX": k["block"], "blockY": 1, "blockZ": 1,
        "gridId": np.arange(1, len(k["start"]) + 1, dtype=np.int64),
        "graphNodeId": k["node"], "graphId": k["graph"],
    }, frozenset({"graphNodeId", "graphId"}))
    tables.items["CUPTI_ACTIVITY_KIND_RUNTIME"] = ({
        "start": rt["start"], "end": rt["end"], "eventClass": 0, "globalTid": rt["gtid"],
        "correlationId": rt["corr"], "nameId": rt["name"], "returnValue": 0,
    }, frozenset())
    tables.items["NVTX_EVENTS"] = ({
        "start": nv["start"], "end": nv["end"], "eventType": 59, "text": nv["text"],
        "globalTid": nv["gtid"], "textId": nv["text_id"], "domainId": 0,
    }, frozenset({"textId"}))
    tables.items["CUPTI_ACTIVITY_KIND_MEMCPY"] = ({
        "start": mc["start"], "end": mc["end"], "deviceId": mc["device"], "contextId": 1,
        "streamId": MAIN_STREAM, "correlationId": mc["corr"], "globalPid": mc["gpid"],
        "bytes": mc["bytes"], "copyKind": mc["kind"], "srcKind": mc["src"], "dstKind": mc["dst"],
        "srcDeviceId": mc["device"], "srcContextId": 1, "dstDeviceId": mc["device"],
        "dstContextId": 1,
    }, frozenset())
    tables.items["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"] = ({
        "start": sy["start"], "end": sy["end"], "deviceId": sy["device"], "contextId": 1,
        "streamId": MAIN_STREAM, "correlationId": sy["corr"], "globalPid": sy["gpid"],
        "syncType": SYNC_STREAM, "eventId": 0,
    }, frozenset())
    tables.expected = {
        "kernel_count": int(sum(kernels)),
        "kernel_ns": kernel_ns,
        "busy_ns": busy,
        "attributed_ns": attributed,
        "nvtx_ranges": int(len(nv["start"])),
        "runtime_rows": int(len(rt["start"])),
        "pids": [r.pid for r in procs],
    }
    return tables
