"""Putting a report on disk atomically.

Files are built in a temporary directory beside the target and moved into place, so an
interrupted run leaves the previous report or none, never a half-written one. Files in
the output directory that are not ours are never deleted.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from nsys_llm_explainer.about import TOOL_NAME
from nsys_llm_explainer.errors import OutputError

# Pieces of a file's text joined at a time (joined, below).
JOIN_PIECES = 1 << 12

MARKER = "report.json"
MD_MARKER = "report.md"
MD_HEADING = f"# {TOOL_NAME} report"
CHOOSE = "choose another --out"
OUR_SUBDIRS = ("tables", "plots")
OUR_FILES = ("ncu_plan.sh", "ncu_targets.json")  # the Nsight Compute plan beside the report


def _is_ours(directory: Path) -> bool:
    """Does `directory` hold a report of ours (report.json, else report.md, else only tables)?"""
    try:
        doc = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("tool"), dict):
        name: object = doc["tool"].get("name")
        return name == TOOL_NAME
    try:  # written with --format md,... but not json
        with (directory / MD_MARKER).open(encoding="utf-8", errors="replace") as fh:
            if fh.readline().startswith(MD_HEADING):
                return True
    except OSError:
        pass
    # written with --format csv only (and the Nsight Compute plan beside it)
    entries = [e for e in directory.iterdir() if e.name not in OUR_FILES or not e.is_file()]
    return [e.name for e in entries] == ["tables"] and all(
        f.suffix == ".csv" for f in entries[0].iterdir()
    )


def _existing_ancestor(path: Path) -> Path:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def check_target(out_dir: Path, force: bool) -> None:
    """Fail early (before any analysis) when the output cannot or must not be written."""
    if out_dir.exists() and not out_dir.is_dir():
        raise OutputError(f"{out_dir}: exists and is not a directory; choose another --out")
    probe_dir = _existing_ancestor(out_dir if out_dir.exists() else out_dir.parent)
    if not probe_dir.is_dir():
        raise OutputError(f"{out_dir}: {probe_dir} is a file, not a directory; {CHOOSE}")
    if not os.access(probe_dir, os.W_OK | os.X_OK):
        raise OutputError(f"{out_dir}: cannot write to {probe_dir} (permission denied); {CHOOSE}")
    try:  # access() says yes to root even on read-only mounts; creating something is the test
        os.rmdir(tempfile.mkdtemp(prefix=f".{out_dir.name}.probe-", dir=probe_dir))
    except OSError as exc:
        raise OutputError(
            f"{out_dir}: cannot write to {probe_dir} ({exc.strerror}); {CHOOSE}"
        ) from None
    if out_dir.is_dir() and any(out_dir.iterdir()) and not force and not _is_ours(out_dir):
        raise OutputError(
            f"{out_dir}: is not empty and holds no previous {TOOL_NAME} report; "
            "pass --force to write into it (other files are kept)"
        )


def joined(pieces: Iterable[str]) -> str:
    """The text of `pieces` (as json.JSONEncoder.iterencode and jinja2's Template.generate
    yield them), joined JOIN_PIECES at a time: json.dumps with an indent and Template.render
    join a list of every piece, tens of thousands of small strings for a large report, which
    holds several times the text."""
    it = iter(pieces)
    blocks = []
    while block := list(itertools.islice(it, JOIN_PIECES)):
        blocks.append("".join(block))
    return "".join(blocks)


def write(out_dir: Path, files: Mapping[str, str] | Iterable[tuple[str, str]], force: bool = False) -> None:
    """Write `files` (relative path -> text, or such pairs one at a time) into `out_dir`,
    replacing a previous report."""
    check_target(out_dir, force)
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=parent))
        tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would become the report's mode
    except OSError as exc:
        raise OutputError(
            f"{out_dir}: cannot create the output directory ({exc.strerror}); {CHOOSE}"
        ) from None
    written: list[str] = []
    try:
        for rel, text in files.items() if isinstance(files, Mapping) else files:
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written.append(rel)
        if not out_dir.exists():
            os.rename(tmp, out_dir)
            return
        if _is_ours(out_dir) and _only_ours(out_dir):
            _swap(tmp, out_dir)
            return
        _merge_into(tmp, out_dir, written)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write the report ({exc.strerror or exc})") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _only_ours(out_dir: Path) -> bool:
    return all(_our_file(p.relative_to(out_dir)) for p in out_dir.rglob("*") if not p.is_dir())


def _our_file(rel: Path) -> bool:
    parts = rel.parts
    if len(parts) == 1:
        return parts[0].startswith("report.") or parts[0].startswith("diff.") or parts[0] in OUR_FILES
    return len(parts) == 2 and parts[0] in OUR_SUBDIRS


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _swap(tmp: Path, out_dir: Path) -> None:
    """Replace a directory that holds only a previous report of ours with the new one."""
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.rmdir(old)
    os.rename(out_dir, old)
    try:
        os.rename(tmp, out_dir)
    except BaseException:
        os.rename(old, out_dir)  # interrupted between the renames: put the previous one back
        raise
    shutil.rmtree(old, ignore_errors=True)


def _merge_into(tmp: Path, out_dir: Path, files: list[str]) -> None:
    """Replace our files one by one (each an atomic rename); report.json last, so a
    directory holding a new report.json holds the rest of that report too."""
    ordered = sorted(files, key=lambda rel: rel == MARKER)
    (out_dir / MARKER).unlink(missing_ok=True)  # a crash midway must not look complete
    for rel in ordered:
        dest = out_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / rel, dest)


def replaces_own_result(
    out: Path, force: bool, json_name: str, prefix: str, subdirs: tuple[str, ...], refuse: tuple[str, ...], what: str
) -> bool:
    """The effective --force of a command that writes beside no report (diff, fleet): a directory
    holding only an earlier result of the same command (`json_name`, files starting with
    `prefix`, and `subdirs`) is replaced without --force; one holding any of `refuse` is refused."""
    if not out.is_dir():
        return force
    held = [name for name in refuse if (out / name).exists()]
    if held:
        raise OutputError(f"{out}: holds another output ({held[0]}); write the {what} to a directory of its own")

    def own(rel: Path) -> bool:
        return (len(rel.parts) == 1 and rel.name.startswith(prefix)) or (
            len(rel.parts) == 2 and rel.parts[0] in subdirs
        )

    files = [p.relative_to(out) for p in out.rglob("*") if not p.is_dir()]
    return force or ((out / json_name).is_file() and all(map(own, files)))
