"""The Jinja templates and their environments: where the templates come from (one family per
kind of output, one environment per family), the cache of their compiled form, and the
Markdown environment every Markdown output renders with.

A template family is the set of templates one environment renders: report.md's, report.html's,
diff.md's and ncu.md's. A family's environment is made with every filter, test and global its templates
use (environment()), and its loader serves the family's templates only (FamilyLoader): a
template can never be compiled in an environment that lacks its filters, because no other
environment can load it. tests/render/test_templates.py checks every family's templates against its
environment's filters.

Compiling the report templates costs about as much as rendering them on a small trace, so
each process compiles a template once (the writers keep one environment per family), and the
compiled code is kept between runs in the user's cache directory:
`$XDG_CACHE_HOME/nsys-llm-explain/` (default `~/.cache/nsys-llm-explain/`), one folder per
Python, Jinja and tool version, per family and per environment (settings, filter and test
names: the compiled code and the checks made while compiling depend on them). An entry holds
the template source's checksum and a digest of the compiled code: an edited template is
compiled again, and an entry that is truncated, damaged or written by another version is
ignored and replaced. The cache changes only the speed of a run, never its output: it is
skipped when the folder cannot be written, or when the environment variable
NSYS_LLM_EXPLAIN_NO_CACHE is set.

The Markdown environment (markdown_environment()), for every Markdown output: report.md and
its metric sections, diff.md, ncu.md.

Every `{{ value }}` is Markdown-escaped by default (finalize), so a kernel or range name
cannot break a table or inject HTML; filters that format numbers return Markup and pass
through untouched. Rule and diagnosis text goes through `rich`: its own `code spans` stay
code, the rest is escaped (render/rich.py). Kernel names go through the `kernel` filter (the
report's labels, kernels/labels.py), or become marks that the caller resolves later (the
metric sections, render/sections.py: MARK, mark); NVTX names through `name` (shortened) or
`nvtx` (normalized, then shortened)."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import html
import marshal
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePath
from typing import Any

import jinja2
from jinja2.bccache import Bucket
from markupsafe import Markup

from nsys_llm_explainer import fmt
from nsys_llm_explainer.about import __version__
from nsys_llm_explainer.analysis.nvtx import normalize
from nsys_llm_explainer.frozen import frozen
from nsys_llm_explainer.render import escape, overview, rich
from nsys_llm_explainer.render.json_writer import more

NO_CACHE_ENV = "NSYS_LLM_EXPLAIN_NO_CACHE"
PACKAGE = "nsys_llm_explainer"


@frozen
class Family:
    """The templates one environment renders. `roots`: the templates the writer renders
    itself (a run renders one of them); `members`: fnmatch patterns of every template the
    family may load (its roots, their includes and imports, the metric sections)."""

    name: str
    roots: tuple[str, ...]
    members: tuple[str, ...]

    def holds(self, template: str) -> bool:
        return any(fnmatch.fnmatchcase(template, p) for p in self.members)

    def for_root(self, root: str, names: Iterable[str]) -> list[str]:
        """The templates among `names` a run that renders `root` may render: every member
        but the other roots."""
        if root not in self.roots:
            raise ValueError(f"{root!r} is not a root of the {self.name} templates")
        return [n for n in names if self.holds(n) and (n == root or n not in self.roots)]


REPORT_MD = Family(
    "report-md",
    roots=("report.md.j2", "report_full.md.j2"),
    members=("report.md.j2", "report_full.md.j2", "report/*.md.j2", "report/gpus.j2",
             "metrics/*.md.j2", "capture_info.md.j2", "ncu/*.md.j2"),
)
REPORT_HTML = Family(
    "report-html",
    roots=("report.html.j2",),
    members=("report.html.j2", "report/*.html.j2", "report/gpus.j2"),
)
DIFF_MD = Family("diff-md", roots=("diff.md.j2",), members=("diff.md.j2",))
DIFF_HTML = Family(
    "diff-html",
    roots=("diff.html.j2",),
    members=("diff.html.j2", "report/page_style.html.j2", "report/sort_script.html.j2"),
)
NCU_MD = Family("ncu-md", roots=("ncu.md.j2",), members=("ncu.md.j2", "ncu/*.md.j2"))
FAMILIES: dict[str, Family] = {f.name: f for f in (REPORT_MD, REPORT_HTML, DIFF_MD, DIFF_HTML, NCU_MD)}


class FamilyLoader(jinja2.BaseLoader):
    """The package's templates, limited to one family's: any other name is not found."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self._package = jinja2.PackageLoader(PACKAGE, "templates")

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str | None, Callable[[], bool] | None]:
        if not self.family.holds(template):
            raise jinja2.TemplateNotFound(template, f"{template} is not one of the {self.family.name} templates")
        return self._package.get_source(environment, template)

    def list_templates(self) -> list[str]:
        return [n for n in self._package.list_templates() if self.family.holds(n)]


def all_templates() -> list[str]:
    """Every template file the package ships."""
    return jinja2.PackageLoader(PACKAGE, "templates").list_templates()


def environment(
    family: Family,
    filters: Mapping[str, Callable[..., Any]],
    globals_: Mapping[str, Any] | None = None,
    **settings: Any,
) -> jinja2.Environment:
    """A family's environment: its loader, settings, filters and globals, all set before
    anything is compiled, then its compiled-template cache."""
    env = jinja2.Environment(loader=FamilyLoader(family), **settings)
    env.filters.update(filters)
    env.globals.update(globals_ or {})
    env.bytecode_cache = bytecode_cache(family.name, env)
    return env


def names(env: jinja2.Environment) -> list[str]:
    """The templates `env` (a family's environment) can load."""
    if not isinstance(env.loader, FamilyLoader):
        raise TypeError("not a template family's environment")
    return env.loader.list_templates()


def warm(env: jinja2.Environment, templates: Iterable[str]) -> None:
    """Compile (or load from the cache) `templates` now, before a run renders them."""
    for name in templates:
        env.get_template(name)


# -- the compiled-template cache ---------------------------------------------------------------

_MAGIC = b"nle-jinja\0"


class _Cache(jinja2.BytecodeCache):
    """Compiled templates in one folder: a file per template, written atomically (a temporary
    file renamed into place). A file holds a header naming the tool, Python and Jinja version,
    the template source's checksum, and the SHA-256 of the marshalled code: anything else
    (a truncated, damaged or foreign file) is ignored, and the template compiled again.
    Failing to read or write an entry is never an error."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.header = _MAGIC + f"{__version__}|{sys.version}|{jinja2.__version__}\n".encode()

    def _path(self, bucket: Bucket) -> Path:
        return self.folder / f"{bucket.key}.cache"

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            data = self._path(bucket).read_bytes()
        except OSError:
            return
        head = self.header + bucket.checksum.encode() + b"\n"
        if not data.startswith(head) or len(data) < len(head) + 32:
            return
        digest, payload = data[len(head): len(head) + 32], data[len(head) + 32:]
        if hashlib.sha256(payload).digest() != digest:
            return
        try:
            code = marshal.loads(payload)
        except (ValueError, EOFError, TypeError):
            return
        if type(code).__name__ == "code":
            bucket.code = code

    def dump_bytecode(self, bucket: Bucket) -> None:
        if bucket.code is None:
            return
        payload = marshal.dumps(bucket.code)
        data = self.header + bucket.checksum.encode() + b"\n" + hashlib.sha256(payload).digest() + payload
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.folder)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self._path(bucket))
            tmp = None
        except OSError:
            pass
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass


def settings_tag(env: jinja2.Environment) -> str:
    """A short digest of what compiled code, and the checks made while compiling, depend on:
    the settings, and the names of the filters and tests."""
    finalize = env.finalize
    settings = (
        env.autoescape if isinstance(env.autoescape, bool) else getattr(env.autoescape, "__qualname__", "?"),
        getattr(finalize, "__module__", None), getattr(finalize, "__qualname__", None),
        env.trim_blocks, env.lstrip_blocks, env.keep_trailing_newline, env.newline_sequence,
        env.undefined.__name__, env.optimized, sorted(env.filters), sorted(env.tests),
    )
    return hashlib.sha1(repr(settings).encode()).hexdigest()[:8]


def cache_root() -> Path:
    """The tool's cache folder: $XDG_CACHE_HOME/nsys-llm-explain, else ~/.cache/nsys-llm-explain."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nsys-llm-explain"


def cache_dir(kind: str) -> Path | None:
    """The folder for compiled templates of one environment (`kind`), or None: caching off,
    or the folder cannot be made or written."""
    if os.environ.get(NO_CACHE_ENV):
        return None
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    folder = cache_root() / f"templates-{__version__}-{py}-jinja{jinja2.__version__}" / kind
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK) else None


def bytecode_cache(family: str, env: jinja2.Environment) -> jinja2.BytecodeCache | None:
    """The cache for `env`'s compiled templates: one folder per family and environment."""
    folder = cache_dir(f"{family}-{settings_tag(env)}")
    return _Cache(folder) if folder is not None else None


__all__ = [
    "DIFF_HTML", "DIFF_MD", "FAMILIES", "NCU_MD", "NO_CACHE_ENV", "REPORT_HTML", "REPORT_MD", "Family",
    "FamilyLoader", "all_templates",
    "bytecode_cache", "cache_dir", "cache_root", "environment", "names", "settings_tag", "warm",
]


# A kernel name as a mark (U+E000 index U+E001) into a list of full names: the metric
# sections are rendered once, and report.md and report.html each put their own label there.
MARK = re.compile("\ue000(\\d+)\ue001")


def mark(refs: list[str], name: object) -> str:
    refs.append("" if name is None else str(name))
    return f"\ue000{len(refs) - 1}\ue001"


def _safe(func: Callable[..., str]) -> Callable[..., Markup]:
    def wrapper(*args: Any, **kwargs: Any) -> Markup:
        return Markup(func(*args, **kwargs))

    return wrapper


def _finalize(value: Any) -> Any:
    if isinstance(value, Markup):
        return value
    if value is None:
        return "n/a"
    if isinstance(value, bool | int | float):
        return value
    return escape.md(value)


@jinja2.pass_context
def _kernel(ctx: jinja2.runtime.Context, name: object) -> Markup:
    """A kernel name as its label (the report's labels, passed as `kernel_labels`), or as a
    mark into `kernel_refs` when the caller resolves names later (render/sections.py)."""
    refs = ctx.get("kernel_refs")
    if refs is not None:
        return Markup(mark(refs, name))
    return Markup(escape.md(ctx["kernel_labels"](name)))


@jinja2.pass_context
def _rich(ctx: jinja2.runtime.Context, text: object, table: bool = False) -> Markup:
    """Rule or diagnosis text: its code spans kept, the rest escaped (render/rich.py)."""
    return Markup(rich.md(text, ctx.get("tainted") or frozenset(), table))


def _nvtx(name: object, limit: int = 80) -> Markup:
    return Markup(escape.md_name(normalize(str(name)), limit))


def filters() -> dict[str, Callable[..., Any]]:
    """The filters of every Markdown environment (report.md's, diff.md's)."""
    return {
        "name": _safe(escape.md_name),
        "kernel": _kernel,
        "nvtx": _nvtx,
        "md": _safe(escape.md),
        "ms": _safe(fmt.ms),
        "us": _safe(fmt.us),
        "dur": _safe(fmt.dur),
        "pct": _safe(fmt.pct),
        "num": _safe(fmt.num),
        "size": _safe(fmt.size),
        "rich": _rich,
        "listed": _safe(lambda v: escape.md(fmt.listed(v))),
        "h": lambda v: Markup(html.escape(escape.strip_controls(v), quote=True)),
        "basename": lambda p: PurePath(str(p)).name,
    }


def markdown_environment(
    family: Family = REPORT_MD, extra_filters: dict[str, Callable[..., Any]] | None = None
) -> jinja2.Environment:
    """A new Markdown environment for `family` (report.md's, or diff.md's with its
    `extra_filters`), every filter set before anything is compiled (environment(), above);
    report.md renders with one per process (report_environment())."""
    globals_ = {
        **overview.template_globals(),
        "more": more,
        "since_first_kernel": overview.since_first_kernel,
        "workload_items": overview.workload_items,
        "bin_counts": overview.bin_counts,
    }
    return environment(
        family,
        {**filters(), **(extra_filters or {})},
        globals_,
        autoescape=False,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


@functools.lru_cache(maxsize=1)
def report_environment() -> jinja2.Environment:
    """The environment report.md renders with: each template compiled once per process."""
    return markdown_environment()
