"""Every file a comment or a string of the package names (`rules/impact.py`, `load.py`)
exists: a reference is read from the naming file's folder, each folder above it up to the
package, the package, or the repository; a bare name may be any module of the package. A
command line's script (`python serve.py ...`) names the user's file, not ours."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import nsys_llm_explainer

PACKAGE = Path(nsys_llm_explainer.__file__).resolve().parent
REPO = PACKAGE.parents[1]
REFERENCE = re.compile(r"(?<![\w./-])(?<!python )([\w./-]*\w\.py)\b")


def missing_references(package: Path, repo: Path) -> list[str]:
    names = {p.name for p in package.rglob("*.py")}
    out = []
    for path in sorted(package.rglob("*.py")):
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
        for tok in tokens:
            if tok.type not in (tokenize.COMMENT, tokenize.STRING):
                continue
            for match in REFERENCE.finditer(tok.string):
                ref = match.group(1).lstrip("./")
                if "/" not in ref and ref in names:
                    continue
                folders = [path.parent, *(p for p in path.parents if package in (p, *p.parents)), repo]
                if not any((folder / ref).is_file() for folder in folders):
                    out.append(f"{path.relative_to(package).as_posix()}:{tok.start[0]}: {ref}")
    return out


def test_every_named_file_exists() -> None:
    assert missing_references(PACKAGE, REPO) == []


def test_a_stale_reference_is_found(tmp_path: Path) -> None:
    package = tmp_path / "src" / "pkg"
    (package / "rules").mkdir(parents=True)
    (package / "rules" / "impact.py").write_text("")
    (package / "model.py").write_text(
        '"""Severity (see rules/severity.py, rules/impact.py, impact.py)."""\n'
        "# helper_main.py reads it; `python serve.py ...` starts the user's program\n"
        'PATH = "trace/wire.py"\n'
    )
    assert missing_references(package, tmp_path) == [
        "model.py:1: rules/severity.py", "model.py:2: helper_main.py", "model.py:3: trace/wire.py",
    ]
