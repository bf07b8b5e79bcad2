"""What each launch tells, from the counters its exports hold.

Every figure has an ordered list of sources: the metric id first (the raw page, or a
`--metrics` row of the details page, under "Command line profiler metrics"), then the
details page's name for it in its section, then a derivation. The first source present
with a number gives the figure, and `sources` names it; a figure with none is None, with
the reason in `missing` ("not measured, because ...").

Units are read from the export (ncu/csvfile.py); a metric id without a unit (a raw page without
its units row) is read in ncu's base unit for it (nsecond, byte, cycle/second).

FLOPs per precision: adds + multiplies + 2 x fused multiply-adds of the predicated-on
thread instructions (`sm__sass_thread_inst_executed_op_{d,f,h}{add,mul,fma}_pred_on.sum`,
also `smsp__` ones), the formula of ncu's roofline sections; else the roofline section's
achieved rates (operations per cycle x SM frequency x duration). Tensor-pipe work:
`sm__ops_path_tensor_src_<in>_dst_<out>.sum` (math operations, a multiply-add counting as
two, like FLOPs) and `sm__inst_executed_pipe_tensor*.sum` (instructions, which have no
fixed FLOP count). Half-precision instructions are counted per instruction, as ncu counts
them (a packed HFMA2 counts once).

DRAM bytes: `dram__bytes.sum`, else `dram__bytes_read.sum` + `dram__bytes_write.sum`, else the
newer `dram__bytes_op_read.sum` + `dram__bytes_op_write.sum` (the only ones some exports of
consumer Blackwell GPUs hold). Tensor-pipe utilisation: the busiest of the tensor pipes'
`sm__pipe_tensor*_cycles_active` and `sm__inst_executed_pipe_tensor*` as a percentage of peak
(classify.py uses it for the compute side). Where the data stays: the L2 hit rate
(`lts__t_sector_hit_rate.pct`, Memory Workload Analysis `L2 Hit Rate`) and the L2 traffic
(`lts__t_bytes.sum`).

Launches from the tables of every file: one launch per profiled kernel launch, its values
joined across files.

ncu numbers the launches of one report 0, 1, 2 ... (`ID`). Exports of the same report (the
details page, one CSV per section, the raw page) repeat that ID with the same process id
and kernel name, so records with equal (ID, Process ID, Kernel Name) are one launch, and
their values are joined, unless they contradict each other: an identity cell both state
differently (grid, block, device, stream, time stamp) or a value both hold that differs by
more than SAME_VALUE_TOLERANCE (auto-scaled units round to four digits). Then they are two
launches (two runs of the same program can give a process the same id in a container)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field

from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.ncu.csvfile import Key, Record, RuleRow, Table, Value, number, scale

SAME_VALUE_TOLERANCE = 0.01  # relative
_COMPARED = ("Kernel Time", "Context", "Stream", "Block Size", "Grid Size", "Device", "CC")


@frozen
class Launch:
    """One profiled kernel launch, as its exports state it."""

    id: int  # ncu's ID within its report
    pid: int | None
    kernel: str  # the kernel name as ncu printed it (demangled, mangled or its short name)
    identity: Mapping[str, str]  # the identity cells (Device, CC, Grid Size ...), as written
    values: Mapping[Key, Value]
    rules: tuple[RuleRow, ...]
    files: tuple[str, ...]  # the files that hold it
    layouts: tuple[str, ...]

    def get(self, key: Key) -> Value | None:
        return self.values.get(key)

    def field(self, name: str) -> str | None:
        v = self.identity.get(name, "")
        return v or None

    @property
    def device(self) -> int | None:
        d = self.field("Device")
        return int(d) if d is not None and d.isdigit() else None

    @property
    def device_name(self) -> str | None:
        v = self.values.get(("", "", "device__attribute_display_name"))
        name = (v.text if v is not None else "") or self.identity.get("Device Name", "")
        return name.strip() or None


def _same(a: Value, b: Value) -> bool:
    if a.text == b.text and a.unit == b.unit:
        return True
    x, y = number(a.text), number(b.text)
    if x is None or y is None:
        return a.text == b.text
    fa, ua = scale(a.unit)
    fb, ub = scale(b.unit)
    if ua != ub:
        return True  # different quantities under one name: not comparable, not a conflict
    x, y = x * fa, y * fb
    return abs(x - y) <= SAME_VALUE_TOLERANCE * max(abs(x), abs(y))


class _Open:
    def __init__(self, rec: Record, table: Table) -> None:
        self.identity = dict(rec.identity)
        self.values = dict(rec.values)
        self.rules = list(rec.rules)
        self.files = [table.path]
        self.layouts = [table.layout]

    def fits(self, rec: Record) -> bool:
        for name in _COMPARED:
            a, b = self.identity.get(name, ""), rec.identity.get(name, "")
            if a and b and a != b:
                return False
        return all(_same(self.values[k], v) for k, v in rec.values.items() if k in self.values)

    def join(self, rec: Record, table: Table) -> None:
        for name, cell in rec.identity.items():
            if cell and not self.identity.get(name):
                self.identity[name] = cell
        for k, v in rec.values.items():
            self.values.setdefault(k, v)
        seen = {(r.section, r.name, r.text) for r in self.rules}
        self.rules.extend(r for r in rec.rules if (r.section, r.name, r.text) not in seen)
        if table.path not in self.files:
            self.files.append(table.path)
        if table.layout not in self.layouts:
            self.layouts.append(table.layout)


def _int(text: str) -> int | None:
    t = text.strip()
    return int(t) if t.isdigit() else None


def join(tables: Sequence[Table]) -> list[Launch]:
    """The launches of all tables, in the order they first appear."""
    opened: list[_Open] = []
    by_key: dict[tuple[str, str, str], list[_Open]] = {}
    for table in tables:
        for key, rec in table.records.items():
            fit = next((o for o in by_key.get(key, []) if table.path not in o.files and o.fits(rec)), None)
            if fit is None:
                fit = _Open(rec, table)
                opened.append(fit)
                by_key.setdefault(key, []).append(fit)
            else:
                fit.join(rec, table)
    out = []
    for o in opened:
        out.append(Launch(
            id=int(o.identity.get("ID", "0") or 0),
            pid=_int(o.identity.get("Process ID", "")),
            kernel=o.identity.get("Kernel Name", ""),
            identity=o.identity,
            values=o.values,
            rules=tuple(o.rules),
            files=tuple(o.files),
            layouts=tuple(o.layouts),
        ))
    return out


CLI_SECTION = "Command line profiler metrics"
SOL = ("GPU Speed Of Light Throughput", "GPU Speed Of Light", "SpeedOfLight")
ROOFLINE = "Roofline"  # the roofline chart sections' names contain it
_TENSOR_OPS = re.compile(r"^sm__ops_path_tensor_src_([a-z0-9]+)_dst_([a-z0-9]+)\.sum$")
_TENSOR_INST = re.compile(r"^sm__inst_executed_pipe_tensor[a-z0-9_]*\.sum$")
_TENSOR_PCT = re.compile(r"^sm__(?:pipe_tensor[a-z0-9_]*_cycles_active|inst_executed_pipe_tensor[a-z0-9_]*)"
                         r"\.avg\.pct_of_peak_sustained_(?:active|elapsed)$")
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_([a-z0-9_]+)_per_issue_active\.ratio$")
STALL_IGNORED = frozenset({"selected", "not_selected"})  # issuing, not waiting
_BASE_UNIT = {  # ncu's base unit of metric ids, for a raw page without its units row
    "gpu__time_duration": "nsecond",
    "dram__bytes": "byte",
    "dram__bytes_read": "byte",
    "dram__bytes_write": "byte",
    "dram__bytes_op_read": "byte",
    "dram__bytes_op_write": "byte",
    "lts__t_bytes": "byte",
}
SRC_DTYPE = {  # tensor source type -> peak class (gpu_specs.DTYPE_CLASSES)
    "fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "fp64": "fp64", "fp8": "fp8", "e4m3": "fp8",
    "e5m2": "fp8", "int8": "int8", "s8": "int8", "u8": "int8", "fp4": "fp4", "e2m1": "fp4",
}


@frozen
class Peaks:
    """The roofline chart section's own peaks (per precision FLOP/s, DRAM bytes/s)."""

    flops: dict[str, float]  # "fp32", "fp64", "fp16" -> FLOP/s
    dram_bandwidth: float | None  # bytes/s


@frozen
class Figures:
    duration_ns: float | None
    sm_pct: float | None  # compute (SM) throughput, % of peak
    memory_pct: float | None  # memory throughput, % of peak (the busiest memory unit)
    dram_pct: float | None
    l2_pct: float | None
    l1_pct: float | None
    dram_bytes: float | None
    dram_bandwidth: float | None  # bytes/s
    achieved_occupancy_pct: float | None
    theoretical_occupancy_pct: float | None
    registers_per_thread: float | None
    block_size: float | None  # threads per block
    grid_size: float | None  # blocks
    shared_mem_per_block: float | None  # bytes
    waves_per_sm: float | None
    sm_count: float | None
    block_limits: dict[str, float]  # "registers", "shared memory", "warps", "blocks", "barriers"
    eligible_warps: float | None  # per scheduler per cycle
    issue_active_pct: float | None  # cycles with an instruction issued, % (one or more eligible)
    top_stall: tuple[str, float] | None  # (reason, cycles per issued instruction)
    flops: dict[str, float]  # precision -> FLOPs ("fp64", "fp32", "fp16")
    tensor_ops: dict[str, float]  # "bf16->fp32" -> operations on the tensor path
    tensor_instructions: float | None
    peaks: Peaks | None
    tensor_pct: float | None = None  # the busiest tensor pipe, % of peak
    l2_hit_pct: float | None = None
    l2_bytes: float | None = None
    sources: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


_NOT_COUNTS = frozenset({"%", "second", "byte", "byte/second", "cycle/second"})


def _fits(canon: str, want: str) -> bool:
    """Whether a value in unit `canon` is the kind `want` asks for ("" asks for a count:
    instructions, warps, blocks, registers per thread ...)."""
    return canon == want or (want == "" and canon not in _NOT_COUNTS)


class _Reader:
    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.sources: dict[str, str] = {}
        self.missing: dict[str, str] = {}
        self.display: dict[str, list[tuple[str, str, str]]] = {}
        for key in launch.values:
            if key[0] or key[1]:
                self.display.setdefault(key[2], []).append(key)

    def metric(self, name: str, want: str) -> float | None:
        """A metric id's value in canonical unit `want` ("" for counts, "%" ...)."""
        v = self.launch.get(("", "", name))
        if v is None:
            return None
        x = number(v.text)
        if x is None:
            return None
        unit = v.unit or _BASE_UNIT.get(name.split(".")[0], "")
        factor, canon = scale(unit)
        return x * factor if _fits(canon, want) else None

    def named(self, names: Iterable[str], want: str, section: Callable[[str], bool]) -> tuple[float, str] | None:
        """A details-page value by its display name in a section `section` accepts."""
        for name in names:
            for key in self.display.get(name, ()):
                if not section(key[0]):
                    continue
                v = self.launch.values[key]
                x = number(v.text)
                if x is None:
                    continue
                factor, canon = scale(v.unit)
                if _fits(canon, want):
                    where = f"{key[0]}: {key[1] + ': ' if key[1] else ''}{name}"
                    return x * factor, where
        return None

    def first(self, figure: str, ids: Iterable[tuple[str, str]], names: Iterable[str] = (),
              want: str = "", section: Callable[[str], bool] = lambda s: True) -> float | None:
        for mid, unit in ids:
            x = self.metric(mid, unit)
            if x is not None:
                self.sources[figure] = mid
                return x
        got = self.named(names, want, section)
        if got is not None:
            self.sources[figure] = got[1]
            return got[0]
        return None


def _sol(section: str) -> bool:
    return any(s in section for s in SOL) and ROOFLINE not in section


def _any(section: str) -> bool:
    return True


def _in(*parts: str) -> Callable[[str], bool]:
    return lambda s: any(p in s for p in parts)


def _dims(text: str | None) -> float | None:
    """`(256, 1, 1)` -> 256."""
    if not text:
        return None
    nums = re.findall(r"\d+", text)
    if not nums:
        return None
    out = 1.0
    for n in nums[:3]:
        out *= float(n)
    return out


def _duration(r: _Reader) -> float | None:
    s = r.first("duration", [("gpu__time_duration.sum", "second"), ("gpu__time_duration.avg", "second")],
                ["Duration"], "second", _sol)
    if s is not None:
        return s * 1e9
    for cycles, rate in (("sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second"),
                         ("gpc__cycles_elapsed.max", "gpc__cycles_elapsed.avg.per_second")):
        c, f = r.metric(cycles, "cycle"), r.metric(rate, "cycle/second")
        if c is not None and f:
            r.sources["duration"] = f"{cycles} / {rate}"
            return c / f * 1e9
    elapsed = r.named(["Elapsed Cycles"], "cycle", _sol)
    clock = r.named(["SM Frequency"], "cycle/second", _sol)
    if elapsed is not None and clock is not None and clock[0]:
        r.sources["duration"] = f"{elapsed[1]} / {clock[1]}"
        return elapsed[0] / clock[0] * 1e9
    r.missing["duration"] = (
        "the export holds no gpu__time_duration, no Speed Of Light Duration and no elapsed cycles with "
        "their clock rate"
    )
    return None


def _memory_pct(r: _Reader, dram: float | None, l2: float | None, l1: float | None) -> float | None:
    m = r.first("memory_pct", [("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%")],
                ["Memory Throughput", "Memory [%]", "Memory Throughput [%]"], "%", _sol)
    if m is not None:
        return m
    parts = [(v, n) for v, n in ((dram, "DRAM"), (l2, "L2"), (l1, "L1/TEX")) if v is not None]
    if parts:
        r.sources["memory_pct"] = f"the largest of {', '.join(n for _, n in parts)} throughput (a lower bound)"
        return max(v for v, _ in parts)
    r.missing["memory_pct"] = (
        "the export holds no memory throughput (Speed Of Light section or gpu__compute_memory_throughput)"
    )
    return None


def _dram_bytes(r: _Reader) -> float | None:
    b = r.first("dram_bytes", [("dram__bytes.sum", "byte")])
    if b is not None:
        return b
    for rd_id, wr_id in (("dram__bytes_read.sum", "dram__bytes_write.sum"),
                         ("dram__bytes_op_read.sum", "dram__bytes_op_write.sum")):
        rd, wr = r.metric(rd_id, "byte"), r.metric(wr_id, "byte")
        if rd is not None and wr is not None:
            r.sources["dram_bytes"] = f"{rd_id} + {wr_id}"
            return rd + wr
    r.missing["dram_bytes"] = (
        "the export holds no dram__bytes.sum (nor both dram__bytes_read.sum and dram__bytes_write.sum, nor both "
        "dram__bytes_op_read.sum and dram__bytes_op_write.sum)"
    )
    return None


def _tensor_pct(r: _Reader) -> float | None:
    best: tuple[float, str] | None = None
    for key in r.launch.values:
        if not (key[0] or key[1]) and _TENSOR_PCT.match(key[2]):
            x = r.metric(key[2], "%")
            if x is not None and (best is None or x > best[0]):
                best = (x, key[2])
    if best is None:
        return None
    r.sources["tensor_pct"] = best[1]
    return best[0]


def _flops(r: _Reader, duration_ns: float | None, sm_hz: float | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for prec, letter in (("fp64", "d"), ("fp32", "f"), ("fp16", "h")):
        for unit in ("sm", "smsp"):
            ops = [r.metric(f"{unit}__sass_thread_inst_executed_op_{letter}{op}_pred_on.sum", "")
                   for op in ("add", "mul", "fma")]
            if all(x is not None for x in ops):
                out[prec] = ops[0] + ops[1] + 2 * ops[2]  # type: ignore[operator]
                r.sources[f"flops_{prec}"] = f"{unit}__sass_thread_inst_executed_op_{letter}{{add,mul,fma}}_pred_on.sum"
                break
        if prec not in out:
            short = {"fp64": "dp", "fp32": "sp", "fp16": "hp"}[prec]
            x = r.first(f"flops_{prec}", [(f"flop_count_{short}.sum", ""), (f"flop_count_{short}", "")])
            if x is not None:
                out[prec] = x
    if "fp32" not in out and duration_ns:
        achieved = _achieved_rate(r, "Single Precision Achieved Value", ("FFMA Operations", "FADD", "FMUL"))
        if achieved is not None and (sm_hz or achieved[1]):
            out["fp32"] = achieved[0] * (achieved[1] or sm_hz or 0) * duration_ns * 1e-9
            r.sources["flops_fp32"] = "roofline section: FFMA ops + FADD + FMUL per cycle x SM frequency x duration"
    if "fp64" not in out and duration_ns:
        achieved = _achieved_rate(r, "Double Precision Achieved Value", ("DFMA Operations", "DADD", "DMUL"))
        if achieved is not None and (sm_hz or achieved[1]):
            out["fp64"] = achieved[0] * (achieved[1] or sm_hz or 0) * duration_ns * 1e-9
            r.sources["flops_fp64"] = "roofline section: DFMA ops + DADD + DMUL per cycle x SM frequency x duration"
    return out


def _achieved_rate(r: _Reader, label: str, parts: tuple[str, ...]) -> tuple[float, float | None] | None:
    """(operations per cycle, SM frequency) from a roofline section's achieved-value group."""
    total, found, hz = 0.0, 0, None
    for key, v in r.launch.values.items():
        if key[1] != label:
            continue
        x = number(v.text)
        if x is None:
            continue
        if key[2] == "SM Frequency":
            hz = x * scale(v.unit)[0]
        elif any(p in key[2] for p in parts) and "Per Cycle" in key[2]:
            total += x
            found += 1
    return (total, hz) if found == len(parts) else None


def _peaks(r: _Reader) -> Peaks | None:
    """Peaks from the roofline chart section: theoretical operations per cycle x SM frequency
    (per precision), theoretical DRAM bytes per cycle x DRAM frequency."""
    groups: dict[str, dict[str, float]] = {}
    for key, v in r.launch.values.items():
        if ROOFLINE not in key[0] or not key[1]:
            continue
        x = number(v.text)
        if x is not None:
            groups.setdefault(key[1], {})[key[2]] = x * scale(v.unit)[0]
    flops: dict[str, float] = {}
    bandwidth = None
    for label, vals in groups.items():
        prec = next((p for w, p in (("Single", "fp32"), ("Double", "fp64"), ("Half", "fp16")) if w in label), None)
        if prec is None or "Achieved" in label:
            continue
        ops = next((x for n, x in vals.items() if n.startswith("Theoretical") and n.endswith("Operations")), None)
        hz = vals.get("SM Frequency")
        if ops and hz:
            flops[prec] = ops * hz
        dram, dram_hz = vals.get("Theoretical DRAM Bytes Accessible"), vals.get("DRAM Frequency")
        if dram and dram_hz and bandwidth is None:
            bandwidth = dram * dram_hz
    if not flops and bandwidth is None:
        return None
    r.sources["peaks"] = (
        "roofline section: theoretical operations per cycle x SM frequency; DRAM bytes per cycle x DRAM frequency"
    )
    return Peaks(flops, bandwidth)


def _tensor(r: _Reader) -> tuple[dict[str, float], float | None]:
    ops: dict[str, float] = {}
    inst = None
    for key in r.launch.values:
        if key[0] or key[1]:
            continue
        m = _TENSOR_OPS.match(key[2])
        if m:
            x = r.metric(key[2], "")
            if x is not None:
                ops[f"{m.group(1)}->{m.group(2)}"] = x
        elif _TENSOR_INST.match(key[2]) and inst is None:
            inst = r.metric(key[2], "")
            if inst is not None:
                r.sources["tensor_instructions"] = key[2]
    if ops:
        r.sources["tensor_ops"] = "sm__ops_path_tensor_src_*_dst_*.sum"
    return ops, inst


def _stall(r: _Reader) -> tuple[str, float] | None:
    best: tuple[str, float] | None = None
    for key in r.launch.values:
        m = _STALL.match(key[2]) if not (key[0] or key[1]) else None
        if m and m.group(1) not in STALL_IGNORED:
            x = r.metric(key[2], "")
            if x is not None and (best is None or x > best[1]):
                best = (m.group(1).replace("_", " "), x)
    return best


def _block_limits(r: _Reader) -> dict[str, float]:
    out = {}
    for what, mid, name in (
        ("registers", "launch__occupancy_limit_registers", "Block Limit Registers"),
        ("shared memory", "launch__occupancy_limit_shared_mem", "Block Limit Shared Mem"),
        ("warps", "launch__occupancy_limit_warps", "Block Limit Warps"),
        ("blocks", "launch__occupancy_limit_blocks", "Block Limit SM"),
        ("barriers", "launch__occupancy_limit_barriers", "Block Limit Barriers"),
    ):
        x = r.first(f"limit_{what}", [(mid, "")], [name], "", _in("Occupancy"))
        if x is not None:
            out[what] = x
    return out


def figures(launch: Launch) -> Figures:
    r = _Reader(launch)
    duration = _duration(r)
    sm = r.first("sm_pct", [("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%")],
                 ["Compute (SM) Throughput", "SM Throughput", "Compute (SM) [%]", "SM [%]"], "%", _sol)
    if sm is None:
        r.missing["sm_pct"] = "the export holds no compute throughput (Speed Of Light section or sm__throughput)"
    dram_pct = r.first("dram_pct", [("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%"),
                                     ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "%")],
                       ["DRAM Throughput", "DRAM Throughput [%]"], "%", _sol)
    l2 = r.first("l2_pct", [("lts__throughput.avg.pct_of_peak_sustained_elapsed", "%")],
                 ["L2 Cache Throughput"], "%", _sol)
    l1 = r.first("l1_pct", [("l1tex__throughput.avg.pct_of_peak_sustained_active", "%"),
                            ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "%")],
                 ["L1/TEX Cache Throughput"], "%", _sol)
    memory = _memory_pct(r, dram_pct, l2, l1)
    nbytes = _dram_bytes(r)
    if nbytes is not None and duration:
        bandwidth: float | None = nbytes / (duration * 1e-9)
        r.sources["dram_bandwidth"] = "DRAM bytes / duration"
    else:
        bandwidth = r.first("dram_bandwidth", [("dram__bytes.sum.per_second", "byte/second")],
                            ["Memory Throughput", "DRAM Bandwidth"], "byte/second", _in("Memory Workload", ROOFLINE))
    sm_hz = r.metric("sm__cycles_elapsed.avg.per_second", "cycle/second")
    if sm_hz is None:
        got = r.named(["SM Frequency"], "cycle/second", _sol)
        sm_hz = got[0] if got else None
    achieved = r.first("achieved_occupancy_pct", [("sm__warps_active.avg.pct_of_peak_sustained_active", "%")],
                       ["Achieved Occupancy"], "%", _in("Occupancy"))
    if achieved is None:
        r.missing["achieved_occupancy_pct"] = "the Occupancy section was not collected"
    theoretical = r.first("theoretical_occupancy_pct", [("sm__maximum_warps_per_active_cycle_pct", "%")],
                          ["Theoretical Occupancy"], "%", _in("Occupancy"))
    block = r.first("block_size", [("launch__block_size", "")], ["Block Size"], "", _in("Launch"))
    if block is None and (block := _dims(launch.field("Block Size"))) is not None:
        r.sources["block_size"] = "Block Size column"
    grid = r.first("grid_size", [("launch__grid_size", "")], ["Grid Size"], "", _in("Launch"))
    if grid is None and (grid := _dims(launch.field("Grid Size"))) is not None:
        r.sources["grid_size"] = "Grid Size column"
    smem = r.first("shared_mem_per_block", [("launch__shared_mem_per_block", "byte")])
    if smem is None:
        parts = [r.named([n], "byte/block", _in("Launch")) or r.named([n], "byte", _in("Launch"))
                 for n in ("Static Shared Memory Per Block", "Dynamic Shared Memory Per Block")]
        if all(p is not None for p in parts):
            smem = sum(p[0] for p in parts if p is not None)
            r.sources["shared_mem_per_block"] = "Launch Statistics: static + dynamic shared memory per block"
    tensor_ops, tensor_inst = _tensor(r)
    if duration is None:
        r.missing["flops"] = r.missing["duration"]
    flops = _flops(r, duration, sm_hz)
    if not flops and not tensor_ops:
        r.missing.setdefault("flops", "the export holds no floating-point instruction count nor tensor-path work")
    return Figures(
        duration_ns=duration,
        sm_pct=sm,
        memory_pct=memory,
        dram_pct=dram_pct,
        l2_pct=l2,
        l1_pct=l1,
        dram_bytes=nbytes,
        dram_bandwidth=bandwidth,
        achieved_occupancy_pct=achieved,
        theoretical_occupancy_pct=theoretical,
        registers_per_thread=r.first("registers_per_thread", [("launch__registers_per_thread", "")],
                                     ["Registers Per Thread"], "", _in("Launch")),
        block_size=block,
        grid_size=grid,
        shared_mem_per_block=smem,
        waves_per_sm=r.first("waves_per_sm", [("launch__waves_per_multiprocessor", "")], ["Waves Per SM"], "",
                             _in("Launch")),
        sm_count=r.first("sm_count", [("device__attribute_multiprocessor_count", ""), ("launch__sm_count", "")],
                         ["# SMs"], "", _in("Launch")),
        block_limits=_block_limits(r),
        eligible_warps=r.first("eligible_warps", [("smsp__warps_eligible.avg.per_cycle_active", "")],
                               ["Eligible Warps Per Scheduler"], "", _in("Scheduler")),
        issue_active_pct=r.first("issue_active_pct", [("smsp__issue_active.avg.pct_of_peak_sustained_active", "%")],
                                 ["One or More Eligible"], "%", _in("Scheduler")),
        top_stall=_stall(r),
        flops=flops,
        tensor_ops=tensor_ops,
        tensor_instructions=tensor_inst,
        peaks=_peaks(r),
        tensor_pct=_tensor_pct(r),
        l2_hit_pct=r.first("l2_hit_pct", [("lts__t_sector_hit_rate.pct", "%")], ["L2 Hit Rate"], "%",
                           _in("Memory Workload")),
        l2_bytes=r.first("l2_bytes", [("lts__t_bytes.sum", "byte")]),
        sources=r.sources,
        missing=r.missing,
    )


__all__ = [
    "SRC_DTYPE",
    "Figures",
    "Peaks",
    "figures",
    "Launch",
    "join",
]
