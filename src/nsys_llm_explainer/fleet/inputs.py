"""Which traces a fleet run reads, in which order, and which run (sweep label) each belongs to.

PATH arguments are trace files, directories (searched recursively) or glob patterns. In a
directory (and a glob that names one), a file counts when its content is a trace: an Nsight
Systems SQLite export (trace/sources.py), or JSON with a `traceEvents` key in its first
JSON_SCAN_BYTES (a PyTorch profiler trace: the Kineto reader needs that key). Other JSON files
(a model's config.json, metrics) are skipped and listed as such; other files are ignored, and
so are the files this tool writes itself (report.json, fleet.json, ... and generator
sidecars). A file named explicitly is always taken, and fails with the reason when it is not
a trace. Traces
are ordered by natural sort of their path, so report_2 comes before report_10 and rank
numbers written by `nsys --output report_%q{RANK}` come out in rank order.
"""

from __future__ import annotations

import csv
import glob
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from nsys_llm_explainer.errors import InputError, UsageError
from nsys_llm_explainer.trace import sources

GLOB_CHARS = re.compile(r"[*?\[]")
OWN_OUTPUTS = frozenset(
    {"report.json", "diff.json", "fleet.json", "fleet_timing.json", "runs.csv", "expected.json"}
)
OWN_SUFFIXES = (".expected.json",)
JSON_SCAN_BYTES = 1 << 20  # decompressed bytes searched for the traceEvents key
TRACE_EVENTS = b'"traceEvents"'
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class TraceInput:
    path: str  # as shown in outputs: the path as found from the arguments
    abspath: str  # what workers open
    label: str  # run label; "" when no --label/--runs was given
    labels: tuple[tuple[str, str], ...] = ()  # (key, value) pairs behind `label`


def natural_key(text: str) -> list[object]:
    """report_2 < report_10: digit runs compare as numbers."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def _has_trace_events(path: Path) -> bool:
    """Whether the first JSON_SCAN_BYTES of the (possibly gzip-compressed) JSON hold the key."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(JSON_SCAN_BYTES)
            if raw.startswith(GZIP_MAGIC):
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
                head = inflate.decompress(raw, JSON_SCAN_BYTES)
                while len(head) < JSON_SCAN_BYTES and not inflate.eof:
                    more = inflate.unconsumed_tail or fh.read(1 << 16)
                    if not more:
                        break
                    head += inflate.decompress(more, JSON_SCAN_BYTES - len(head))
                raw = head
    except (OSError, zlib.error):
        return False
    return TRACE_EVENTS in raw


def _dir_traces(root: Path, skipped: list[Path]) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name in OWN_OUTPUTS or name.endswith(OWN_SUFFIXES):
                continue
            path = Path(dirpath) / name
            kind = sources.sniff(path)
            if kind == sources.NSYS or (kind == sources.KINETO and _has_trace_events(path)):
                found.append(path)
            elif kind == sources.KINETO:
                skipped.append(path)
    return found


def expand(args: list[str], skipped: list[Path] | None = None) -> list[Path]:
    """Files, directories and globs -> trace files (deduplicated, natural order); JSON files
    of a directory that are not traces are appended to `skipped`."""
    skipped = skipped if skipped is not None else []
    out: list[Path] = []
    for arg in args:
        path = Path(arg)
        if path.is_dir():
            hits = _dir_traces(path, skipped)
            if not hits:
                raise InputError(f"{arg}: the directory holds no trace (.sqlite export or profiler JSON)")
            out.extend(hits)
        elif path.exists():
            out.append(path)
        elif GLOB_CHARS.search(arg):
            hits = []
            for hit in sorted(glob.glob(arg, recursive=True)):
                hits.extend(_dir_traces(Path(hit), skipped) if Path(hit).is_dir() else [Path(hit)])
            if not hits:
                raise InputError(f"{arg}: no file matches this pattern")
            out.extend(hits)
        else:
            raise InputError(f"{arg}: no such file or directory")
    skipped[:] = _unique(skipped)
    return _unique(out)


def _unique(paths: list[Path]) -> list[Path]:
    """Each file once (a symlink reaching it again drops out), in natural order."""
    seen: set[str] = set()
    unique = []
    for p in paths:
        real = os.path.realpath(p)
        if real not in seen:
            seen.add(real)
            unique.append(p)
    return sorted(unique, key=lambda p: natural_key(str(p)))


def parse_label_specs(specs: list[str]) -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for spec in specs:
        key, sep, rx = spec.partition("=")
        if not sep or not key.strip() or not rx:
            raise UsageError(f"--label {spec!r}: expected KEY=REGEX, e.g. batch=bs(?P<batch>\\d+)")
        try:
            out.append((key.strip(), re.compile(rx)))
        except re.error as exc:
            raise UsageError(f"--label {spec!r}: bad regular expression ({exc})") from None
    return out


def label_of(path: str, specs: list[tuple[str, re.Pattern[str]]]) -> tuple[tuple[str, str], ...]:
    """The group named KEY when the pattern has one, else the whole match."""
    pairs = []
    for key, rx in specs:
        m = rx.search(path)
        if m is None:
            raise UsageError(f"--label {key}: the pattern {rx.pattern!r} does not match {path}")
        value = m.group(key) if key in rx.groupindex else m.group(0)
        pairs.append((key, value or ""))
    return tuple(pairs)


def read_runs_csv(path: Path) -> dict[str, str]:
    """runs.csv (columns path, label) -> realpath -> label; paths relative to the CSV."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the runs file ({exc.strerror or exc})") from None
    except (csv.Error, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not a CSV file ({exc})") from None
    if not rows or not {"path", "label"} <= set(rows[0]):
        raise UsageError(f"{path}: needs a header with the columns path,label and at least one row")
    out: dict[str, str] = {}
    for row in rows:
        p = Path((row.get("path") or "").strip())
        if not str(p):
            raise UsageError(f"{path}: a row has an empty path")
        full = p if p.is_absolute() else path.parent / p
        out[os.path.realpath(full)] = (row.get("label") or "").strip()
    return out


def collect(
    args: list[str], label_specs: list[str], runs_csv: Path | None, skipped: list[str] | None = None
) -> list[TraceInput]:
    """The traces to analyze, with their run labels; JSON files of a directory that are not
    traces are appended to `skipped` (as paths shown in outputs)."""
    if label_specs and runs_csv is not None:
        raise UsageError("give either --label or --runs, not both")
    runs = read_runs_csv(runs_csv) if runs_csv is not None else None
    if not args:
        if runs is None:
            raise UsageError("no trace given: pass trace files, directories or globs (or --runs runs.csv)")
        args = [p for p in runs]
    passed: list[Path] = []
    files = expand(args, passed)
    if skipped is not None:
        skipped.extend(str(p) for p in passed)
    specs = parse_label_specs(label_specs)
    out = []
    for f in files:
        shown = str(f)
        if runs is not None:
            real = os.path.realpath(f)
            if real not in runs:
                raise UsageError(f"{shown}: not listed in {runs_csv}")
            pairs: tuple[tuple[str, str], ...] = (("label", runs[real]),)
            label = runs[real]
        else:
            pairs = label_of(shown, specs)
            label = ", ".join(f"{k}={v}" for k, v in pairs) if len(pairs) > 1 else (
                pairs[0][1] if pairs else ""
            )
        out.append(TraceInput(shown, os.path.abspath(f), label, pairs))
    return out
