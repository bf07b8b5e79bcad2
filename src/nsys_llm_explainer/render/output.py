"""Putting a report on disk atomically.

Files are built in a temporary directory beside the target and moved into place, so an
interrupted run leaves the previous report or none, never a half-written one. Files in
the output directory that are not ours are never deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from nsys_llm_explainer import TOOL_NAME
from nsys_llm_explainer.errors import OutputError

MARKER = "report.json"
OUR_SUBDIRS = ("tables", "plots")


def _is_ours(directory: Path) -> bool:
    try:
        doc = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("tool"), dict) and doc["tool"].get("name") == TOOL_NAME


def check_target(out_dir: Path, force: bool) -> None:
    """Fail early (before any analysis) when the output cannot or must not be written."""
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"{out_dir}: exists and is not a directory; choose another --out")
    parent = out_dir.parent if not out_dir.exists() else out_dir
    probe_dir = parent
    while not probe_dir.exists():
        probe_dir = probe_dir.parent
    if not os.access(probe_dir, os.W_OK | os.X_OK):
        raise OutputError(f"{out_dir}: cannot write to {probe_dir} (permission denied); choose another --out")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force and not _is_ours(out_dir):
        raise OutputError(
            f"{out_dir}: is not empty and holds no previous {TOOL_NAME} report; "
            "pass --force to write into it (other files are kept)"
        )


def write(out_dir: Path, files: dict[str, str], force: bool = False) -> None:
    """Write `files` (relative path -> text) into `out_dir`, replacing a previous report."""
    check_target(out_dir, force)
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=parent))
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot create the output directory ({exc.strerror})") from None
    try:
        for rel, text in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        if not out_dir.exists():
            os.rename(tmp, out_dir)
            return
        if _is_ours(out_dir) and all(_our_file(p.relative_to(out_dir)) for p in out_dir.rglob("*") if not p.is_dir()):
            _swap(tmp, out_dir)
            return
        _merge_into(tmp, out_dir, files)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write the report ({exc.strerror or exc})") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _our_file(rel: Path) -> bool:
    parts = rel.parts
    if len(parts) == 1:
        return parts[0].startswith("report.") or parts[0].startswith("diff.")
    return len(parts) == 2 and parts[0] in OUR_SUBDIRS


def _swap(tmp: Path, out_dir: Path) -> None:
    """Replace a directory that holds only a previous report of ours with the new one."""
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.rmdir(old)
    os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def _merge_into(tmp: Path, out_dir: Path, files: dict[str, str]) -> None:
    """Replace our files one by one (each an atomic rename); report.json last, so a
    directory holding a new report.json holds the rest of that report too."""
    ordered = sorted(files, key=lambda rel: rel == MARKER)
    (out_dir / MARKER).unlink(missing_ok=True)  # a crash midway must not look complete
    for rel in ordered:
        dest = out_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / rel, dest)
