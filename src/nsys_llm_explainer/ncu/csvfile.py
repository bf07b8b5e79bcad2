"""One Nsight Compute CSV export, read into tables of launch records.

What real files hold, and how it is read:

- Text before the header: `==PROF==` lines, the profiled program's own output (ncu prints
  its CSV to stdout, mixed with the program's). The header is the first row whose first
  cell is `ID` and that names a `Kernel Name` column; everything before it is skipped.
  Lines after it that do not start with a quote (ncu quotes every cell) are skipped too
  and counted: `==PROF== Disconnected`, program output printed between results.
- A byte-order mark, Windows (CRLF) or old Mac (CR) line endings, gzip compression.
- Cells with line breaks inside quotes (rule descriptions): a record runs on until its
  quotes balance.
- Rows shorter than the header (trailing empty cells left out): the missing cells are empty.
- A second header further down (two exports concatenated) starts a new table.

Layouts, told apart by the header:

- details (`--page details`, also `ncu --import x.ncu-rep --csv`): one row per launch,
  section and metric: `Section Name`, optionally `Body Item Label`, `Metric Name`,
  `Metric Unit`, `Metric Value`, and rule rows (`Rule Name`, `Rule Type`, `Rule
  Description`, `Estimated Speedup`) whose metric cells are empty. A file whose metric
  rows all come from one section is reported as that section's export ("section: ...").
  The older layout has a `Kernel Time` column (a wall-clock time stamp) and no Block,
  Grid, Device or CC columns.
- raw (`--page raw`): one row per launch, one column per metric (named by metric id),
  usually with a row of units right under the header (its identity cells empty).

A value is kept as written (text and unit); ncu/csvfile.py reads numbers from it. Records are
keyed by (ID, Process ID, Kernel Name) within a table: ncu gives each profiled launch its
own ID within one report.

Which files the RESULTS arguments name: CSV files, or folders of them (searched through
their subfolders, as `ncu_plan.sh` or a per-kernel folder layout leaves them).

A `.ncu-rep` given by name is an error that prints the export command; one in a folder
without a CSV of the same name beside it is a note with that command. A file named on
the command line must be an ncu export (else the error says what it is); a CSV in a
folder that is not one (a report's own tables) is skipped with a note.

Numbers and units as Nsight Compute writes them in CSV exports.

Values: `12,532,580,352` (thousands separators), `161,177.21`, `4.0e-05`, `n/a` or an empty
cell (no value), text (`cudaFuncCachePreferNone`, `(256, 1, 1)`: no number).

Units: the base unit (`byte`, `second`, `cycle`, `inst`, `hz` ...) with an optional SI or
binary prefix, per part of a ratio: `usecond`, `us`, `Mbyte`, `Gbyte/s`, `Kibyte`,
`cycle/second`, `cycle/usecond`, `Ghz`, `register/thread`, `%`. `scale` turns a value into
the canonical unit: seconds for time, bytes, cycle/second for frequencies (`hz` is
cycle/second), the rest as counted. ncu's auto-scaled units are decimal (a `Kbyte` is 1,000
bytes); `Kibyte` is 1,024. An unknown unit keeps its value unscaled, under its own name."""

from __future__ import annotations

import csv
import gzip
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.frozen import frozen

MAX_BYTES = 1 << 30  # 1 GiB: far above a details page for thousands of launches
MAX_RECORD_LINES = 200  # a quoted cell spanning more lines is a stray quote in program output
REP_SUFFIX = ".ncu-rep"
IDENTITY = (
    "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
    "Stream", "Block Size", "Grid Size", "Device", "CC", "Device Name",
)
LONG_COLUMNS = (
    "Section Name", "Body Item Label", "Metric Name", "Metric Unit", "Metric Value", "Rule Name",
    "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup",
)
METRIC_ID = re.compile(r"^[a-z][a-z0-9_]*__[A-Za-z0-9_.]+$")  # dram__bytes.sum, launch__grid_size
NOTHING_PROFILED = re.compile(r"==(?:WARNING|PROF)==.*No kernels were profiled", re.IGNORECASE)

# A counter's key: ("", "", metric id) for metric ids (raw columns, `--metrics` rows), else
# (section name, body item label, metric name) as the details page names it.
Key = tuple[str, str, str]


@frozen
class Value:
    text: str  # the cell as written
    unit: str  # the unit as written ("" when none)


@frozen
class RuleRow:
    section: str  # the section's identifier (SpeedOfLight, Occupancy ...)
    name: str
    kind: str  # OPT, WRN, INF, ERR, or ""
    text: str
    speedup_type: str  # local, global, or ""
    speedup: str  # estimated speedup in %, as written


@dataclass
class Record:
    """One launch as one table states it."""

    identity: dict[str, str]
    values: dict[Key, Value] = field(default_factory=dict)
    rules: list[RuleRow] = field(default_factory=list)


@dataclass
class Table:
    """One header and the records under it."""

    path: str
    index: int  # the table's position in its file (0 unless exports were concatenated)
    layout: str  # "details", "details (Kernel Time layout)", "section: <name>", "raw"
    header_line: int  # 1-based line number of the header
    records: dict[tuple[str, str, str], Record]
    skipped_lines: int = 0  # lines after the header that were not records


@frozen
class FileRead:
    path: str
    tables: tuple[Table, ...]
    preamble_lines: int  # lines before the first header (==PROF==, program output)
    skipped_lines: int  # lines after a header that were not records
    nothing_profiled: bool  # ncu said it profiled no kernel


def _quote(text: str) -> str:
    """POSIX single quotes, so that a path with spaces or quotes pastes as one argument."""
    return "'" + text.replace("'", "'\\''") + "'"


def rep_command(path: Path) -> str:
    """The command that exports a .ncu-rep file as the CSV this tool reads."""
    out = path.name[: -len(REP_SUFFIX)] if path.name.endswith(REP_SUFFIX) else path.stem
    return f"ncu --import {_quote(str(path))} --csv --page details > {_quote(out + '.csv')}"


def rep_error(path: Path) -> InputError:
    return InputError(
        f"{path}: an Nsight Compute report (.ncu-rep) is binary; export it as CSV and pass the "
        f"CSV: {rep_command(path)}"
    )


def _text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(f"{path}: {size:,} bytes is more than the {MAX_BYTES:,} bytes an ncu CSV export may have")
        with path.open("rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, ValueError):
            raise InputError(f"{path}: a damaged gzip file") from None
        if len(raw) > MAX_BYTES:
            raise InputError(f"{path}: more than {MAX_BYTES:,} bytes when uncompressed")
    if path.name.endswith(REP_SUFFIX) or b"\x00" in raw[:65536]:
        if path.name.endswith(REP_SUFFIX):
            raise rep_error(path)
        raise InputError(f"{path}: a binary file, not an Nsight Compute CSV export")
    return raw.decode("utf-8-sig", errors="replace")


def _lines(text: str) -> list[str]:
    return [ln.lstrip("\ufeff") for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]


def _records(lines: list[str], start: int) -> Iterator[tuple[int, list[str] | None]]:
    """(line index, cells) of each quoted record from `start` on; cells None for a line
    that is no record (it does not start with a quote)."""
    i = start
    while i < len(lines):
        line = lines[i]
        if not line.startswith('"'):
            yield i, None
            i += 1
            continue
        buf, j = line, i
        while buf.count('"') % 2 and j + 1 < len(lines) and j - i < MAX_RECORD_LINES:
            j += 1
            buf += "\n" + lines[j]
        if buf.count('"') % 2:  # never balanced: a stray quote, not a record
            yield i, None
            i += 1
            continue
        try:
            cells = next(csv.reader([buf]), [])
        except csv.Error:  # quotes that balance but do not parse (a newline outside them)
            yield i, None
            i += 1
            continue
        yield i, cells
        i = j + 1


def _is_header(cells: list[str]) -> bool:
    return bool(cells) and cells[0].strip() == "ID" and "Kernel Name" in (c.strip() for c in cells)


def _header_cells(line: str) -> list[str] | None:
    s = line.lstrip()
    if not (s.startswith('"ID"') or s.startswith("ID,")):
        return None
    cells = next(csv.reader([s]), [])
    return [c.strip() for c in cells] if _is_header(cells) else None


class _Builder:
    def __init__(self, path: str, index: int, header: list[str], line: int) -> None:
        self.path, self.index, self.header, self.line = path, index, header, line
        self.col = {name: i for i, name in reversed(list(enumerate(header)))}
        self.long = "Metric Name" in self.col and "Metric Value" in self.col
        self.identity_cols = [c for c in IDENTITY if c in self.col]
        self.metric_cols = [
            (i, name) for i, name in enumerate(header) if name not in IDENTITY and name not in LONG_COLUMNS and name
        ] if not self.long else []
        self.units: list[str] | None = None
        self.records: dict[tuple[str, str, str], Record] = {}
        self.sections: set[str] = set()
        self.skipped = 0
        self.first = True

    def cell(self, cells: list[str], name: str) -> str:
        i = self.col.get(name)
        return cells[i] if i is not None and i < len(cells) else ""

    def add(self, cells: list[str]) -> None:
        first, self.first = self.first, False
        rid = cells[0].strip() if cells else ""
        if not rid:
            if first and not self.long:
                self.units = cells  # the raw page's units row
            else:
                self.skipped += 1
            return
        if not rid.isdigit():
            self.skipped += 1
            return
        ident = {c: self.cell(cells, c).strip() for c in self.identity_cols}
        key = (rid, ident.get("Process ID", ""), ident.get("Kernel Name", ""))
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = Record(ident)
        if self.long:
            self._add_long(rec, cells)
        else:
            for i, name in self.metric_cols:
                text = cells[i] if i < len(cells) else ""
                unit = self.units[i] if self.units is not None and i < len(self.units) else ""
                rec.values[("", "", name)] = Value(text.strip(), unit.strip())

    def _add_long(self, rec: Record, cells: list[str]) -> None:
        section = self.cell(cells, "Section Name").strip()
        name = self.cell(cells, "Metric Name").strip()
        rule = self.cell(cells, "Rule Name").strip()
        if name:
            self.sections.add(section)
            label = self.cell(cells, "Body Item Label").strip()
            key: Key = ("", "", name) if METRIC_ID.match(name) else (section, label, name)
            rec.values[key] = Value(self.cell(cells, "Metric Value").strip(), self.cell(cells, "Metric Unit").strip())
        if rule:
            text = " ".join(self.cell(cells, "Rule Description").split())
            rec.rules.append(RuleRow(
                section, rule, self.cell(cells, "Rule Type").strip(), text,
                self.cell(cells, "Estimated Speedup Type").strip(), self.cell(cells, "Estimated Speedup").strip(),
            ))

    def table(self) -> Table:
        if not self.long:
            layout = "raw"
        elif len(self.sections) == 1 and "Command line profiler metrics" not in self.sections:
            layout = f"section: {next(iter(self.sections))}"
        elif "Kernel Time" in self.col:
            layout = "details (Kernel Time layout)"
        else:
            layout = "details"
        return Table(self.path, self.index, layout, self.line, self.records, self.skipped)


def read_file(path: Path) -> FileRead:
    """The tables of one CSV export; InputError for a file that holds no ncu header (a
    .ncu-rep, a binary file, another CSV)."""
    text = _text(path)
    lines = _lines(text)
    start = next((i for i, ln in enumerate(lines) if _header_cells(ln) is not None), None)
    nothing = bool(NOTHING_PROFILED.search(text[:1 << 20])) if start is None else False
    if start is None:
        if nothing or (lines and all(not ln.strip() or ln.startswith("==") for ln in lines)):
            return FileRead(str(path), (), len(lines), 0, True)
        raise InputError(
            f"{path}: not an Nsight Compute CSV export (no header row starting with \"ID\" and naming "
            "\"Kernel Name\"); write one with ncu --csv --page details (or --page raw)"
        )
    tables: list[Table] = []
    builder: _Builder | None = None
    skipped = 0
    for i, cells in _records(lines, start):
        if cells is not None and _is_header(cells):
            if builder is not None:
                tables.append(builder.table())
            builder = _Builder(str(path), len(tables), [c.strip() for c in cells], i + 1)
            continue
        assert builder is not None  # the first record is the header
        if cells is None:
            if lines[i].strip():
                builder.skipped += 1
            continue
        builder.add(cells)
    if builder is not None:
        tables.append(builder.table())
    skipped = sum(t.skipped_lines for t in tables)
    return FileRead(str(path), tuple(tables), start, skipped, False)


__all__ = [
    "IDENTITY",
    "FileRead",
    "Key",
    "Record",
    "RuleRow",
    "Table",
    "Value",
    "read_file",
    "rep_command",
    "rep_error",
    "Found",
    "resolve",
    "NO_VALUE",
    "in_unit",
    "number",
    "scale",
]


MAX_FILES = 10_000
CSV_SUFFIXES = (".csv", ".csv.gz")


@frozen
class Found:
    path: Path
    named: bool  # given on the command line (not found in a folder)


def _is_csv(p: Path) -> bool:
    return p.name.lower().endswith(CSV_SUFFIXES)


def _stem(p: Path) -> str:
    name = p.name
    for suffix in (*CSV_SUFFIXES, REP_SUFFIX):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return p.stem


def _folder(folder: Path, notes: list[str]) -> list[Found]:
    try:
        entries = sorted(p for p in folder.rglob("*") if p.is_file())
    except OSError as exc:
        raise InputError(f"{folder}: cannot be listed ({exc.strerror or exc})") from None
    csvs = [p for p in entries if _is_csv(p)]
    reps = [p for p in entries if p.name.endswith(REP_SUFFIX)]
    exported = {(p.parent, _stem(p)) for p in csvs}
    lone = [p for p in reps if (p.parent, _stem(p)) not in exported]
    if not csvs:
        if lone:
            more = f" (and {len(lone) - 1} more .ncu-rep files)" if len(lone) > 1 else ""
            raise InputError(f"{rep_error(lone[0]).message}{more}")
        raise InputError(f"{folder}: no CSV files in this folder (an ncu CSV export ends in .csv)")
    for p in lone:
        notes.append(f"{p} has no CSV export beside it and was not read: {rep_command(p)}")
    if len(csvs) > MAX_FILES:
        raise InputError(f"{folder}: {len(csvs):,} CSV files, more than the {MAX_FILES:,} read at once")
    return [Found(p, False) for p in csvs]


def resolve(paths: Sequence[Path | str]) -> tuple[list[Found], list[str]]:
    """The files to read, in argument order (a folder's files sorted by path), and notes."""
    if not paths:
        raise InputError("no Nsight Compute results given (CSV files or folders of them)")
    out: list[Found] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            found = _folder(p, notes)
        elif p.name.endswith(REP_SUFFIX):
            raise rep_error(p)
        elif not p.exists():
            raise InputError(f"{p}: no such file or folder")
        else:
            found = [Found(p, True)]
        for f in found:
            key = f.path.resolve()
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out, notes


_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?$")
_PLAIN = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
NO_VALUE = frozenset({"", "n/a", "N/A", "-", "nan", "NaN", "inf", "-inf"})

# Base units, as written after the prefix (compared without case) -> canonical name.
_BASES = {
    "byte": "byte", "bytes": "byte", "b": "byte",
    "second": "second", "seconds": "second", "sec": "second", "s": "second",
    "hz": "cycle/second",
    "cycle": "cycle", "cycles": "cycle",
    "inst": "inst", "instruction": "inst", "instructions": "inst",
    "warp": "warp", "warps": "warp", "block": "block", "blocks": "block",
    "thread": "thread", "threads": "thread", "register": "register", "registers": "register",
    "sector": "sector", "request": "request", "wavefront": "wavefront", "cluster": "cluster",
    "op": "op", "ops": "op", "flop": "flop", "transaction": "transaction", "pass": "pass",
}
_PREFIXES = {
    "": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
    "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4,
    "m": 1e-3, "u": 1e-6, "\u00b5": 1e-6, "n": 1e-9, "p": 1e-12,
}
_PART = re.compile(r"^(Ki|Mi|Gi|Ti|[KkMGTPmu\u00b5np])?([A-Za-z]+)$")


def number(text: str) -> float | None:
    """The value of a cell, or None for n/a, an empty cell or text that is no number."""
    s = text.strip()
    if s in NO_VALUE:
        return None
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    elif not _PLAIN.match(s):
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _part(text: str) -> tuple[float, str] | None:
    t = text.strip()
    base = _BASES.get(t.lower())
    if base is not None:
        return 1.0, base
    m = _PART.match(t)
    if m is None:
        return None
    base = _BASES.get(m.group(2).lower())
    if base is None:
        return None
    return _PREFIXES[m.group(1) or ""], base


@lru_cache(maxsize=512)
def scale(unit: str) -> tuple[float, str]:
    """(factor, canonical unit) so that value x factor is in the canonical unit.

    `%` stays `%`; an empty unit is a plain count; a unit this module does not know keeps
    factor 1 and its own name."""
    u = unit.strip()
    if u in ("", "%"):
        return 1.0, u
    if u.lower() in ("percent", "pct"):
        return 1.0, "%"
    parts = u.split("/")
    if len(parts) > 3:
        return 1.0, u
    first = _part(parts[0])
    if first is None:
        return 1.0, u
    factor, names = first[0], [first[1]]
    for p in parts[1:]:
        found = _part(p)
        if found is None:
            return 1.0, u
        factor /= found[0]
        names.append(found[1])
    return factor, "/".join(names)


def in_unit(value: float | None, unit: str, want: str) -> float | None:
    """`value` (in `unit`) converted to the canonical unit `want`, or None when the unit is
    not of that kind."""
    if value is None:
        return None
    factor, name = scale(unit)
    return value * factor if name == want else None
