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

Location: --cache-dir, else $NSYS_LLM_EXPLAIN_CACHE, else $XDG_CACHE_HOME/nsys-llm-explain/fleet,
else ~/.cache/nsys-llm-explain/fleet; on a Dask cluster, each worker's own default unless
--cache-dir names a shared directory. An unwritable cache is skipped, never an error.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from nsys_llm_explainer import __version__

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
    try:
        text = (entry_dir(root, k) / SUMMARY_NAME).read_text(encoding="utf-8")
        doc = json.loads(text)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


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
        (tmp / SUMMARY_NAME).write_text(json.dumps(summary), encoding="utf-8")
        os.rename(tmp, final)
        return True
    except OSError:
        return final.is_dir()
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
