"""Which traces a fleet run reads, in which order, and which run (sweep label) each belongs to.

PATH arguments are trace files, directories (searched recursively) or glob patterns. In a
directory (and a glob that names one), a file counts when its content is a trace: an Nsight
Systems SQLite export (trace/formats.py), or JSON with a `traceEvents` key in its first
JSON_SCAN_BYTES (a PyTorch profiler trace: the Kineto reader needs that key). Other JSON files
(a model's config.json, metrics) are skipped and listed as such; other files are ignored, and
so are the files this tool writes itself (report.json, fleet.json, ... and generator
sidecars). A file named explicitly is always taken, and fails with the reason when it is not
a trace. Traces
are ordered by natural sort of their path, so report_2 comes before report_10 and rank
numbers written by `nsys --output report_%q{RANK}` come out in rank order.

One capture counts once: a path that reaches a file already taken (a symlink, a hard link),
or a file with the same contents as one already taken (a copy), drops out and is listed in
`duplicates` with the trace it repeats. Contents are compared by size, then by a digest of
the first and last FINGERPRINT_BYTES, then, only when those agree, by a digest of the whole
file.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import os
import re
import zlib
from pathlib import Path

from nsys_llm_explainer.errors import InputError, UsageError
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.model import TraceFormat
from nsys_llm_explainer.trace import formats

GLOB_CHARS = re.compile(r"[*?\[]")
OWN_OUTPUTS = frozenset(
    {"report.json", "diff.json", "fleet.json", "fleet_timing.json", "runs.csv", "expected.json"}
)
OWN_SUFFIXES = (".expected.json",)
JSON_SCAN_BYTES = 1 << 20  # decompressed bytes searched for the traceEvents key
TRACE_EVENTS = b'"traceEvents"'
GZIP_MAGIC = b"\x1f\x8b"
FINGERPRINT_BYTES = 1 << 20
HASH_CHUNK = 1 << 22


@frozen
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
            kind = formats.sniff(path)
            if kind is TraceFormat.NSYS or (kind is TraceFormat.KINETO and _has_trace_events(path)):
                found.append(path)
            elif kind is TraceFormat.KINETO:
                skipped.append(path)
    return found


def expand(args: list[str], skipped: list[Path] | None = None,
           duplicates: list[dict[str, str]] | None = None) -> list[Path]:
    """Files, directories and globs -> trace files (deduplicated, natural order); JSON files
    of a directory that are not traces are appended to `skipped`, repeats of a trace already
    taken to `duplicates` ({path, same_as, how})."""
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
    skipped[:] = _unique(skipped, [])
    dropped: list[dict[str, str]] = []
    files = _same_contents(_unique(out, dropped), dropped)
    if duplicates is not None:
        duplicates.extend(sorted(dropped, key=lambda d: natural_key(d["path"])))
    return files


def _unique(paths: list[Path], dropped: list[dict[str, str]]) -> list[Path]:
    """Each file once, in natural order: a path reaching a file already taken (a symlink, a
    hard link) drops out into `dropped`."""
    ordered = sorted(paths, key=lambda p: natural_key(str(p)))
    seen: dict[tuple[int, int] | str, Path] = {}
    unique = []
    for p in ordered:
        try:
            st = os.stat(p)
            key: tuple[int, int] | str = (st.st_dev, st.st_ino)
        except OSError:
            key = os.path.realpath(p)
        if key in seen:
            if str(seen[key]) != str(p):
                dropped.append({"path": str(p), "same_as": str(seen[key]), "how": "the same file"})
            continue
        seen[key] = p
        unique.append(p)
    return unique


def _digest(path: Path, whole: bool) -> str | None:
    """The file's size with a digest of its first and last FINGERPRINT_BYTES, or of all of it."""
    h = hashlib.sha256()
    try:
        with path.open("rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if whole:
                while chunk := fh.read(HASH_CHUNK):
                    h.update(chunk)
            else:
                h.update(fh.read(FINGERPRINT_BYTES))
                fh.seek(max(size - FINGERPRINT_BYTES, 0))
                h.update(fh.read(FINGERPRINT_BYTES))
    except OSError:
        return None
    return f"{size}:{h.hexdigest()}"


def _same_contents(paths: list[Path], dropped: list[dict[str, str]]) -> list[Path]:
    """`paths` less the files whose contents repeat an earlier one's (moved to `dropped`)."""
    by_size: dict[int, list[Path]] = {}
    for p in paths:
        try:
            by_size.setdefault(os.path.getsize(p), []).append(p)
        except OSError:
            pass
    repeats: set[int] = set()
    whole: dict[int, str | None] = {}

    def full(p: Path) -> str | None:
        if id(p) not in whole:
            whole[id(p)] = _digest(p, whole=True)
        return whole[id(p)]

    for group in by_size.values():
        if len(group) < 2:
            continue
        kept_by_quick: dict[str, list[Path]] = {}
        for p in group:
            quick = _digest(p, whole=False)
            if quick is None:
                continue
            kept = kept_by_quick.setdefault(quick, [])
            same = next((k for k in kept if full(p) is not None and full(p) == full(k)), None)
            if same is None:
                kept.append(p)
            else:
                dropped.append({"path": str(p), "same_as": str(same), "how": "the same contents"})
                repeats.add(id(p))
    return [p for p in paths if id(p) not in repeats]


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
    args: list[str], label_specs: list[str], runs_csv: Path | None, skipped: list[str] | None = None,
    duplicates: list[dict[str, str]] | None = None,
) -> list[TraceInput]:
    """The traces to analyze, with their run labels; JSON files of a directory that are not
    traces are appended to `skipped` (as paths shown in outputs), repeats of a trace already
    taken to `duplicates`."""
    if label_specs and runs_csv is not None:
        raise UsageError("give either --label or --runs, not both")
    runs = read_runs_csv(runs_csv) if runs_csv is not None else None
    if not args:
        if runs is None:
            raise UsageError("no trace given: pass trace files, directories or globs (or --runs runs.csv)")
        args = [p for p in runs]
    passed: list[Path] = []
    files = expand(args, passed, duplicates)
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
