"""Running the installed command as on a new machine: an empty home directory (so empty
caches) for every run, a working directory of its own, nothing inherited that changes what
the tool keeps between runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# XDG_CACHE_HOME as the test session found it (isolate() replaces it): pip's download cache.
USER_CACHE_HOME: str | None = os.environ.get("XDG_CACHE_HOME")
# Variables that would make a run skip or redirect a cache, or print a traceback.
TOOL_VARIABLES = ("NSYS_LLM_EXPLAIN_NO_CACHE", "NSYS_LLM_EXPLAIN_CACHE", "NSYS_LLM_EXPLAIN_DEBUG")
TIMEOUT_S = 120


@dataclass(frozen=True)
class Ran:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    home: Path

    def ok(self) -> Ran:
        assert self.returncode == 0, f"{' '.join(self.argv)} exited {self.returncode}: {self.stderr}"
        assert "Traceback" not in self.stderr + self.stdout, self.stderr
        return self


def isolate(cache_home: Path) -> None:
    """Point this process's (and its children's) tool caches at `cache_home`, a new empty
    folder, so that every test session starts as a new machine whatever ~/.cache holds."""
    for name in TOOL_VARIABLES[:2]:
        os.environ.pop(name, None)
    os.environ["XDG_CACHE_HOME"] = str(cache_home)


def user_environment() -> dict[str, str]:
    """This process's environment with the user's own XDG_CACHE_HOME (for pip)."""
    env = dict(os.environ)
    env.pop("XDG_CACHE_HOME", None)
    if USER_CACHE_HOME is not None:
        env["XDG_CACHE_HOME"] = USER_CACHE_HOME
    return env


def new_home(parent: Path) -> Path:
    """A new, empty home directory under `parent`."""
    parent.mkdir(parents=True, exist_ok=True)
    n = sum(1 for _ in parent.glob("home*"))
    home = parent / f"home{n}"
    home.mkdir()
    return home


def environment(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment with `home` as HOME and its .cache as XDG_CACHE_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in TOOL_VARIABLES}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    env.update(extra)
    return env


def run(tool: Sequence[str], args: Sequence[str | Path], home: Path, cwd: Path, timeout: float = TIMEOUT_S,
        **extra: str) -> Ran:
    """Run the command; subprocess.TimeoutExpired (the test fails) past `timeout` seconds."""
    argv = (*tool, *map(str, args))
    proc = subprocess.run(argv, cwd=cwd, env=environment(home, **extra), capture_output=True, text=True,
                          timeout=timeout, check=False)
    return Ran(argv, proc.returncode, proc.stdout, proc.stderr, home)


def dev_tool() -> tuple[str, ...]:
    """The command as the project's own install (make install) provides it."""
    script = Path(sys.executable).parent / "nsys-llm-explain"
    return (str(script),) if script.is_file() else (sys.executable, "-m", "nsys_llm_explainer")


def files(out: Path, skip: Sequence[str] = ()) -> dict[str, bytes]:
    """Every file under `out` by relative path (`skip`: file names left out)."""
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in skip}


def cache_entries(home: Path) -> list[str]:
    """What a run left in its home directory, relative to it."""
    return sorted(p.relative_to(home).as_posix() for p in home.rglob("*") if p.is_file())


def source_tree(dest: Path) -> Path:
    """The files `pip install .` needs, copied to `dest` (so a build leaves nothing in the
    checkout)."""
    dest.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "src", dest / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    return dest


def install(venv: Path, work: Path) -> Path:
    """A new virtualenv at `venv` with the project installed from a copy of its sources, as
    `pip install .` does (not editable); returns its nsys-llm-explain script. pip's own
    download cache is the user's, so only a first install ever downloads."""
    src = source_tree(work / "src-copy")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "."],
        cwd=src, env=user_environment(), capture_output=True, text=True, timeout=900, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return venv / "bin" / "nsys-llm-explain"


def small_traces(d: Path) -> dict[str, Path]:
    """Two small Nsight Systems exports and two PyTorch profiler traces in `d`."""
    from tests.fixtures import variants
    from tests.fixtures.kineto import workload

    return {
        "nsys": variants.multi_process_colliding_corr(d / "trace.sqlite"),
        "nsys2": variants.no_nvtx(d / "other.sqlite"),
        "kineto": workload.write(d / "trace.json")[0],
        "kineto2": workload.write(d / "other.json", base_ns=1_700_000_000_000_500_000)[0],
    }
