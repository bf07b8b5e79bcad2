"""Per-trace results kept between runs, so a rerun only analyzes the traces that changed.

An entry is a directory <cache>/<key[:2]>/<key>/ holding the trace's report.json and the
fleet summary (summary.json). The key is the SHA-256 of:

- the trace's identity: its size, its modification time (ns) and the SHA-256 of its first
  and last MiB (an SQLite export rewrites its header's change counter on every write; a
  profiler JSON changes at its ends when events are added);
- the tool version, the identity of its installed code (each source, template and data
  file's path, size and modification time: a checkout edited between runs is new code even
  under the same version) and SUMMARY_VERSION (the layout of summary.json);
- the options that change numbers (kernel names, step range, phase map, categories, gaps).

summary.json holds the summary's JSON text with the key, the tool version, SUMMARY_VERSION and
the text's SHA-256: an entry that does not match all of them (truncated, damaged, written by
another version) is ignored and replaced. Entries are written atomically, so any number of
processes may share a cache. A cache changes only how fast a run is, never its output.

Location: --cache-dir, else $NSYS_LLM_EXPLAIN_CACHE, else $XDG_CACHE_HOME/nsys-llm-explain/fleet,
else ~/.cache/nsys-llm-explain/fleet; on a Dask cluster, each worker's own default unless
--cache-dir names a shared directory. An unwritable cache is skipped, never an error.
--no-cache, or the environment variable NSYS_LLM_EXPLAIN_NO_CACHE, turns it off.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from nsys_llm_explainer.about import __version__

SUMMARY_VERSION = 2
EDGE_BYTES = 1 << 20
CACHE_ENV = "NSYS_LLM_EXPLAIN_CACHE"
REPORT_NAME = "report.json"
SUMMARY_NAME = "summary.json"


def default_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "nsys-llm-explain" / "fleet"


def identity(path: Path) -> dict[str, Any]:
    st = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        digest.update(fh.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            fh.seek(max(st.st_size - EDGE_BYTES, EDGE_BYTES))
            digest.update(fh.read(EDGE_BYTES))
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "edges_sha256": digest.hexdigest()}


@functools.cache
def code_identity() -> str:
    """SHA-256 over the package's own files (relative path, size, mtime), computed once."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.suffix in (".py", ".j2", ".json") and "__pycache__" not in f.parts:
            st = f.stat()
            digest.update(f"{f.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def key(ident: dict[str, Any], options: dict[str, Any]) -> str:
    doc = {"trace": ident, "tool": __version__, "code": code_identity(), "summary": SUMMARY_VERSION,
           "options": options}
    text = json.dumps(doc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_dir(root: Path, k: str) -> Path:
    return root / k[:2] / k


def load(root: Path, k: str) -> dict[str, Any] | None:
    """The summary stored under `k`, or None. An entry that is not exactly what store() writes
    for `k` under this version (truncated, damaged, written by another version or for another
    key) is a miss, and is removed so that this run's result can take its place."""
    folder = entry_dir(root, k)
    try:
        text = (folder / SUMMARY_NAME).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    summary = _checked(text, k)
    if summary is None:
        discard(folder)
    return summary


def _checked(text: str, k: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(text)
        inner = doc["summary"]
        if (doc["key"], doc["tool"], doc["summary_version"]) != (k, __version__, SUMMARY_VERSION):
            return None
        if hashlib.sha256(inner.encode("utf-8")).hexdigest() != doc["sha256"]:
            return None
        summary = json.loads(inner)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    ok = (isinstance(summary, dict) and isinstance(summary.get("ranks"), list)
          and type(summary.get("warnings")) is int and isinstance(summary.get("format"), str | None))
    return summary if ok else None


def discard(folder: Path) -> None:
    """Remove an entry: renamed out of the way first, so no reader sees it half removed."""
    gone = folder.with_name(f".{folder.name[:8]}.gone-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(folder, gone)
    except OSError:
        return
    shutil.rmtree(gone, ignore_errors=True)


def store(root: Path, k: str, report_json: str, summary: dict[str, Any]) -> bool:
    """Write the entry atomically (a temporary directory renamed into place); False when
    the cache cannot be written. Two workers storing the same key: the first one wins."""
    final = entry_dir(root, k)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{k[:8]}.tmp-", dir=final.parent))
    except OSError:
        return False
    try:
        (tmp / REPORT_NAME).write_text(report_json, encoding="utf-8")
        inner = json.dumps(summary)
        envelope = {"key": k, "tool": __version__, "summary_version": SUMMARY_VERSION,
                    "sha256": hashlib.sha256(inner.encode("utf-8")).hexdigest(), "summary": inner}
        (tmp / SUMMARY_NAME).write_text(json.dumps(envelope), encoding="utf-8")
        os.rename(tmp, final)
        return True
    except OSError:
        return final.is_dir()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
