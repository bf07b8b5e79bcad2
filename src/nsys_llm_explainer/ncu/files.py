"""Which files the RESULTS arguments name: CSV files, or folders of them (searched through
their subfolders, as `ncu_plan.sh` or a per-kernel folder layout leaves them).

A `.ncu-rep` given by name is an error that prints the export command; one in a folder
without a CSV of the same name beside it is a note with that command. A file named on
the command line must be an ncu export (else the error says what it is); a CSV in a
folder that is not one (a report's own tables) is skipped with a note.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from nsys_llm_explainer.errors import InputError
from nsys_llm_explainer.ncu.csvfile import REP_SUFFIX, rep_command, rep_error

MAX_FILES = 10_000
CSV_SUFFIXES = (".csv", ".csv.gz")


@dataclass(frozen=True)
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


__all__ = ["Found", "resolve"]
