"""Nsight Compute results: the files read, each launch with its figures, class and roofline
point, and the document ncu.json holds (schema/ncu.schema.json).

`load(paths)` reads and joins the files (cached per process by the files' identity, so
the command line's check and the report's metric read them once); `assess(loaded, gpu)`
adds the class and the roofline point, with peaks from the export or from the peak table
for the GPU the export names (`device__attribute_display_name`, else a Device Name column),
or else the GPU the caller names (the trace's, or --gpu) when the export's compute
capability does not contradict it. A launch whose export holds its DRAM bytes but no
throughput percentages (a `--metrics` export) gets its DRAM throughput from those bytes over
its duration against the GPU's peak bandwidth, and that lower bound as its memory
throughput, so it can be classified.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from nsys_llm_explainer.compute import peaks
from nsys_llm_explainer.compute.peaks import GpuSpec
from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.ncu import LAUNCH_COLUMNS
from nsys_llm_explainer.ncu import classify as cls
from nsys_llm_explainer.ncu.counters import Figures, Launch, figures, join
from nsys_llm_explainer.ncu.csvfile import FileRead, number, read_file, resolve

SCHEMA_VERSION = "1.1"
MAX_RULES = 5  # ncu's own rule results kept per launch (largest estimated speedup first)
# Compute capability (major.minor) -> architecture family (peaks.ARCH_FAMILIES).
CC_ARCH = {
    "7.0": "volta", "7.2": "volta", "7.5": "turing", "8.0": "ampere", "8.6": "ampere", "8.7": "ampere",
    "8.9": "ada", "9.0": "hopper", "10.0": "blackwell", "10.1": "blackwell", "10.3": "blackwell",
    "11.0": "blackwell", "12.0": "blackwell", "12.1": "blackwell",
}


@frozen
class FileInfo:
    path: str
    layouts: tuple[str, ...]
    launches: int
    preamble_lines: int
    skipped_lines: int
    nothing_profiled: bool


@frozen
class Loaded:
    files: tuple[FileInfo, ...]
    launches: tuple[Launch, ...]
    figures: tuple[Figures, ...]
    notes: tuple[str, ...]


@frozen
class Measured:
    launch: Launch
    figures: Figures
    verdict: cls.Verdict
    point: cls.RooflinePoint | None
    point_reason: str | None  # why there is no roofline point
    gpu: str | None  # the GPU model whose table peaks were used, with where it came from


@frozen
class Results:
    files: tuple[FileInfo, ...]
    launches: tuple[Measured, ...]
    notes: tuple[str, ...]

    @property
    def kernel_names(self) -> list[str]:
        return list(dict.fromkeys(m.launch.kernel for m in self.launches))


def _identity(paths: Sequence[Path | str]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((str(p), st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((str(p), -1, -1))
    return tuple(out)


def load(paths: Sequence[Path | str]) -> Loaded:
    """The launches of every file the arguments name; InputError when none can be read."""
    found, notes = resolve(paths)
    return _load(_identity([f.path for f in found]), tuple(f.named for f in found), tuple(notes))


@functools.lru_cache(maxsize=4)
def _load(files: tuple[tuple[str, int, int], ...], named: tuple[bool, ...], notes_in: tuple[str, ...]) -> Loaded:
    notes = list(notes_in)
    reads: list[FileRead] = []
    for (path, _, _), is_named in zip(files, named, strict=True):
        try:
            fr = read_file(Path(path))
        except InputError as exc:
            if is_named:
                raise
            notes.append(f"{exc.message}; skipped")
            continue
        if fr.nothing_profiled:
            notes.append(f"{path}: ncu profiled no kernel (check the kernel name filter and the launch skip)")
        if fr.skipped_lines:
            notes.append(f"{path}: {fr.skipped_lines:,} lines after the header were no results and were skipped")
        reads.append(fr)
    tables = [t for fr in reads for t in fr.tables]
    launches = join(tables)
    if not launches:
        what = ", ".join(p for p, _, _ in files)
        why = f": {notes[0]}" if notes else ""
        raise InputError(f"no kernel launches in the Nsight Compute results ({what}){why}")
    per_file = Counter(f for launch in launches for f in launch.files)
    infos = tuple(
        FileInfo(fr.path, tuple(dict.fromkeys(t.layout for t in fr.tables)), per_file.get(fr.path, 0),
                 fr.preamble_lines, fr.skipped_lines, fr.nothing_profiled)
        for fr in reads
    )
    return Loaded(infos, tuple(launches), tuple(figures(launch) for launch in launches), tuple(notes))


def _cc_arch(cc: str | None) -> str | None:
    return CC_ARCH.get(cc.strip()) if cc else None


def gpu_for(
    launch: Launch, hint: tuple[str, str] | None, table: dict[str, GpuSpec] | None
) -> tuple[GpuSpec | None, str | None]:
    """The peak-table entry for a launch: its own device name, else `hint` (name, where it
    comes from) when its architecture agrees with the export's compute capability."""
    own = launch.device_name
    if own:
        spec = peaks.lookup(own, table)
        return spec, (own if spec else None)
    if hint is None:
        return None, None
    spec = peaks.lookup(hint[0], table)
    arch = _cc_arch(launch.field("CC"))
    if spec is None or (arch is not None and spec.arch and spec.arch != arch):
        return None, None
    return spec, f"{hint[0]} ({hint[1]})"


def with_dram_pct(f: Figures, spec: GpuSpec | None, basis: str) -> Figures:
    """DRAM throughput from the bytes, where the export gives no percentage: achieved
    bandwidth over the peak (the roofline section's, else the peak table's); the memory
    throughput, when missing too, is then that lower bound."""
    if f.dram_pct is not None or not f.dram_bandwidth:
        return f
    peak = f.peaks.dram_bandwidth if f.peaks is not None and f.peaks.dram_bandwidth else (
        spec.hbm_gbps * 1e9 if spec is not None and spec.hbm_gbps else None)
    if not peak:
        return f
    where = "the roofline section's DRAM peak" if f.peaks is not None and f.peaks.dram_bandwidth else \
        f"the peak table's bandwidth ({basis or (spec.model if spec else '')})"
    pct = 100.0 * f.dram_bandwidth / peak
    sources = {**f.sources, "dram_pct": f"DRAM bytes / duration over {where}"}
    missing = dict(f.missing)
    memory = f.memory_pct
    if memory is None:
        memory = pct
        sources["memory_pct"] = "DRAM throughput from its bytes (a lower bound: L2 and L1 not measured)"
        missing.pop("memory_pct", None)
    return dataclasses.replace(f, dram_pct=pct, memory_pct=memory, sources=sources, missing=missing)


def assess(loaded: Loaded, gpu: tuple[str, str] | None = None, table: dict[str, GpuSpec] | None = None) -> Results:
    """Class and roofline point of every launch. `gpu`: (device name, where it comes from) for
    exports that do not name their GPU; `table`: the peak table (default: built-in)."""
    out = []
    for launch, fig in zip(loaded.launches, loaded.figures, strict=True):
        spec, basis = gpu_for(launch, gpu, table)
        fig = with_dram_pct(fig, spec, basis or "")
        point, why = cls.roofline(fig, spec, basis or "", launch.kernel)
        out.append(Measured(launch, fig, cls.classify(fig), point, why, basis))
    return Results(loaded.files, tuple(out), loaded.notes)


# ---------------------------------------------------------------- the document (ncu.json)

class RuleDoc(TypedDict):
    """One of ncu's own rule results (OPT, WRN or ERR) of a launch."""

    section: str
    name: str
    type: str
    speedup_type: str | None
    speedup_pct: float | None
    text: str


class PointDoc(TypedDict):
    """A launch's place on the roofline (classify.RooflinePoint), rounded as ncu.json writes it."""

    precision: str
    tensor: bool
    flops: float
    flop_per_byte: float | None
    achieved_tflops: float | None
    peak_tflops: float | None
    bandwidth_gbps: float | None
    roof_tflops: float | None
    pct_of_roof: float | None
    bound: str | None
    peaks_basis: str
    reason: str | None
    dram_only: bool
    note: str | None


class SectionPeaks(TypedDict):
    tflops: dict[str, float | None]
    dram_gbps: float | None


# One launch as ncu.json (and report.json's metrics.ncu) write it; a report adds the match to
# the trace's kernels (matched_kernel, matched_by, match_detail).
LaunchDoc = TypedDict("LaunchDoc", {
    "index": int, "id": int, "pid": int | None, "kernel": str, "device": int | None, "device_name": str | None,
    "cc": str | None, "grid": str | None, "block": str | None, "files": list[str], "layouts": list[str],
    "duration_ns": float | None, "sm_pct": float | None, "memory_pct": float | None, "dram_pct": float | None,
    "l2_pct": float | None, "l1_pct": float | None, "dram_bytes": float | None, "dram_gbps": float | None,
    "tensor_pipe_pct": float | None, "l2_hit_pct": float | None, "l2_bytes": float | None,
    "achieved_occupancy_pct": float | None, "theoretical_occupancy_pct": float | None,
    "occupancy_limit": str | None, "registers_per_thread": float | None, "block_size": float | None,
    "grid_size": float | None, "shared_mem_per_block": float | None, "waves_per_sm": float | None,
    "flops": dict[str, float | None], "tensor_ops": dict[str, float | None], "tensor_instructions": float | None,
    "class": str | None, "pct_of_roof": float | None, "limiter": str | None, "causes": list[str],
    "unclassified_reason": str | None, "section_peaks": SectionPeaks | None, "roofline": PointDoc | None,
    "roofline_reason": str | None, "peaks_gpu": str | None, "sources": dict[str, str],
    "not_measured": dict[str, str], "ncu_rules": list[RuleDoc],
    "matched_kernel": NotRequired[str | None], "matched_by": NotRequired[str | None],
    "match_detail": NotRequired[str | None],
})


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(float(x), digits)


def _rules(launch: Launch) -> list[RuleDoc]:
    rows = [r for r in launch.rules if r.kind in ("OPT", "WRN", "ERR")]
    rows.sort(key=lambda r: -(number(r.speedup) or 0.0))
    return [
        {"section": r.section, "name": r.name, "type": r.kind, "speedup_type": r.speedup_type or None,
         "speedup_pct": _r(number(r.speedup)), "text": r.text}
        for r in rows[:MAX_RULES]
    ]


def _point(p: cls.RooflinePoint | None) -> PointDoc | None:
    if p is None:
        return None
    return {
        "precision": p.precision,
        "tensor": p.tensor,
        "flops": p.flops,
        "flop_per_byte": _r(p.flop_per_byte, 3),
        "achieved_tflops": _r(p.achieved_flops / 1e12, 4),
        "peak_tflops": _r(p.peak_flops / 1e12 if p.peak_flops else None, 3),
        "bandwidth_gbps": _r(p.peak_bandwidth / 1e9 if p.peak_bandwidth else None, 1),
        "roof_tflops": _r(p.roof_flops / 1e12 if p.roof_flops else None, 4),
        "pct_of_roof": _r(p.pct_of_roof),
        "bound": p.bound,
        "peaks_basis": p.basis,
        "reason": p.reason,
        "dram_only": p.dram_only,
        "note": p.note,
    }


def _section_peaks(f: Figures) -> SectionPeaks | None:
    """The roofline chart section's own peaks, when the export has it."""
    if f.peaks is None:
        return None
    return {"tflops": {k: _r(v / 1e12, 3) for k, v in f.peaks.flops.items()},
            "dram_gbps": _r(f.peaks.dram_bandwidth / 1e9 if f.peaks.dram_bandwidth else None, 1)}


def launch_doc(index: int, m: Measured) -> LaunchDoc:
    """One launch as ncu.json (and report.json's metrics.ncu) write it."""
    f, v, launch = m.figures, m.verdict, m.launch
    return {
        "index": index,
        "id": launch.id,
        "pid": launch.pid,
        "kernel": launch.kernel,
        "device": launch.device,
        "device_name": launch.device_name,
        "cc": launch.field("CC"),
        "grid": launch.field("Grid Size"),
        "block": launch.field("Block Size"),
        "files": list(launch.files),
        "layouts": list(launch.layouts),
        "duration_ns": _r(f.duration_ns, 1),
        "sm_pct": _r(f.sm_pct),
        "memory_pct": _r(f.memory_pct),
        "dram_pct": _r(f.dram_pct),
        "l2_pct": _r(f.l2_pct),
        "l1_pct": _r(f.l1_pct),
        "dram_bytes": _r(f.dram_bytes, 0),
        "dram_gbps": _r(f.dram_bandwidth / 1e9 if f.dram_bandwidth is not None else None, 3),
        "tensor_pipe_pct": _r(f.tensor_pct),
        "l2_hit_pct": _r(f.l2_hit_pct),
        "l2_bytes": _r(f.l2_bytes, 0),
        "achieved_occupancy_pct": _r(f.achieved_occupancy_pct),
        "theoretical_occupancy_pct": _r(f.theoretical_occupancy_pct),
        "occupancy_limit": v.occupancy_limit,
        "registers_per_thread": _r(f.registers_per_thread, 0),
        "block_size": _r(f.block_size, 0),
        "grid_size": _r(f.grid_size, 0),
        "shared_mem_per_block": _r(f.shared_mem_per_block, 0),
        "waves_per_sm": _r(f.waves_per_sm, 3),
        "flops": {k: _r(x, 0) for k, x in f.flops.items()},
        "tensor_ops": {k: _r(x, 0) for k, x in f.tensor_ops.items()},
        "tensor_instructions": _r(f.tensor_instructions, 0),
        "class": v.kind,
        "pct_of_roof": _r(v.pct_of_roof),
        "limiter": v.limiter,
        "causes": list(v.causes),
        "unclassified_reason": v.reason,
        "section_peaks": _section_peaks(f),
        "roofline": _point(m.point),
        "roofline_reason": m.point_reason,
        "peaks_gpu": m.gpu,
        "sources": dict(f.sources),
        "not_measured": dict(f.missing),
        "ncu_rules": _rules(launch),
    }


def launch_rows(launches: list[LaunchDoc]) -> list[dict[str, Any]]:
    """ncu.csv (and the report's tables/ncu_launches.csv): one row per launch object, with
    the columns LAUNCH_COLUMNS (matched_kernel and matched_by only in a report)."""
    rows = []
    for d in launches:
        p = d["roofline"]
        row = {c: d.get(c) for c in LAUNCH_COLUMNS}
        row.update({
            "flops_fp64": d["flops"].get("fp64"), "flops_fp32": d["flops"].get("fp32"),
            "flops_fp16": d["flops"].get("fp16"),
            "tensor_ops": "; ".join(f"{k} {v:.0f}" for k, v in d["tensor_ops"].items()) or None,
            "roofline_precision": p["precision"] if p else None,
            "flop_per_byte": p["flop_per_byte"] if p else None,
            "achieved_tflops": p["achieved_tflops"] if p else None, "roof_tflops": p["roof_tflops"] if p else None,
            "roofline_pct_of_roof": p["pct_of_roof"] if p else None, "dram_only": p["dram_only"] if p else None,
            "files": "; ".join(d["files"]),
        })
        rows.append(row)
    return rows


def summary(results: Results) -> dict[str, Any]:
    """Counts over the launches: how many, how many kernels, how many per class."""
    classes = Counter(m.verdict.kind for m in results.launches if m.verdict.kind)
    return {
        "launch_count": len(results.launches),
        "kernel_count": len(results.kernel_names),
        "classified": sum(classes.values()),
        "classes": {k: classes.get(k, 0) for k in cls.CLASSES},
        "thresholds": {"busy_pct": cls.BUSY_PCT, "low_occupancy_pct": cls.LOW_OCCUPANCY_PCT},
        "files": [
            {"path": f.path, "layouts": list(f.layouts), "launches": f.launches, "preamble_lines": f.preamble_lines,
             "skipped_lines": f.skipped_lines, "nothing_profiled": f.nothing_profiled}
            for f in results.files
        ],
    }


def document(results: Results, tool: dict[str, str]) -> dict[str, Any]:
    """ncu.json."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": tool,
        **summary(results),
        "notes": list(results.notes),
        "launches": [launch_doc(i, m) for i, m in enumerate(results.launches)],
    }


__all__ = [
    "FileInfo", "Loaded", "Measured", "Results", "assess", "document", "launch_doc", "launch_rows",
    "load", "summary",
]
