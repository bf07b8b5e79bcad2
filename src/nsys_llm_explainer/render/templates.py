"""Where the Jinja templates come from, and the cache of their compiled form.

Compiling the report templates costs about as much as rendering them on a small trace, so
each process compiles a template once (the writers keep one environment), and the compiled
code is kept between runs in the user's cache directory:
`$XDG_CACHE_HOME/nsys-llm-explain/` (default `~/.cache/nsys-llm-explain/`), one folder per
Python, Jinja and tool version and per environment kind and settings (the compiled code
depends on them: autoescape, finalize, whitespace control). Jinja checks the template
source's checksum on every load, so an edited template is compiled again. The cache is skipped when
the folder cannot be written (the report is the same, only slower), or when the
environment variable NSYS_LLM_EXPLAIN_NO_CACHE is set.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import jinja2
from jinja2.bccache import Bucket, FileSystemBytecodeCache

from nsys_llm_explainer import __version__

NO_CACHE_ENV = "NSYS_LLM_EXPLAIN_NO_CACHE"


def loader() -> jinja2.BaseLoader:
    return jinja2.PackageLoader("nsys_llm_explainer", "templates")


class _QuietCache(FileSystemBytecodeCache):
    """A bytecode cache that never fails a report: unreadable or unwritable entries are
    simply compiled again."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, ValueError, EOFError):
            bucket.reset()

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def settings_tag(env: jinja2.Environment) -> str:
    """A short digest of the settings compiled code depends on."""
    finalize = env.finalize
    settings = (
        env.autoescape if isinstance(env.autoescape, bool) else getattr(env.autoescape, "__qualname__", "?"),
        getattr(finalize, "__module__", None), getattr(finalize, "__qualname__", None),
        env.trim_blocks, env.lstrip_blocks, env.keep_trailing_newline, env.newline_sequence,
        env.undefined.__name__, env.optimized,
    )
    return hashlib.sha1(repr(settings).encode()).hexdigest()[:8]


def cache_dir(kind: str) -> Path | None:
    """The folder for compiled templates of one environment kind ("md", "html"), or None."""
    if os.environ.get(NO_CACHE_ENV):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    folder = Path(base) / "nsys-llm-explain" / f"templates-{__version__}-{py}-jinja{jinja2.__version__}" / kind
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def bytecode_cache(kind: str, env: jinja2.Environment) -> jinja2.BytecodeCache | None:
    """The cache for `env`'s compiled templates: one folder per kind and settings."""
    folder = cache_dir(f"{kind}-{settings_tag(env)}")
    return _QuietCache(str(folder)) if folder is not None else None


def with_cache(kind: str, env: jinja2.Environment) -> jinja2.Environment:
    """`env` with its bytecode cache set (bytecode_cache)."""
    env.bytecode_cache = bytecode_cache(kind, env)
    return env


__all__ = ["NO_CACHE_ENV", "bytecode_cache", "cache_dir", "loader", "settings_tag", "with_cache"]
