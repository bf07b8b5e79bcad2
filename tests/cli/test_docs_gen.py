"""Documentation cannot rot: generated docs are up to date, the README's set-up commands are
the ones CI runs, and each core metric page names every key of its report.json entry."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nsys_llm_explainer.cli import docs_gen
from nsys_llm_explainer.schema import load_fragment
from tests.conftest import CORE_METRICS

ROOT = Path(__file__).resolve().parents[2]


def test_generated_docs_are_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nsys_llm_explainer.cli.docs_gen", "--check", "--root", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"{proc.stdout}{proc.stderr}\nrun `make docs` and commit the result"
    )


def test_check_detects_stale_docs(tmp_path: Path) -> None:
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    readme = tmp_path / "README.md"
    text = readme.read_text(encoding="utf-8")
    readme.write_text(text.replace("--top-n", "--top-m", 1), encoding="utf-8")
    assert docs_gen.main(["--check", "--root", str(tmp_path)]) == 1
    assert docs_gen.main(["--root", str(tmp_path)]) == 0
    assert docs_gen.main(["--check", "--root", str(tmp_path)]) == 0
    assert (tmp_path / "docs" / "rules.md").read_text() == (ROOT / "docs" / "rules.md").read_text()
    assert readme.read_text(encoding="utf-8") == (ROOT / "README.md").read_text(encoding="utf-8")


def test_cli_help_is_stable_across_terminal_widths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = docs_gen.cli_reference()
    monkeypatch.setenv("COLUMNS", "250")
    assert docs_gen.cli_reference() == narrow
    assert "--out" in narrow and "Exit codes" in narrow


def test_readme_help_is_what_the_program_prints() -> None:
    env = {**os.environ, "COLUMNS": str(docs_gen.HELP_WIDTH)}
    proc = subprocess.run(
        [sys.executable, "-m", "nsys_llm_explainer", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    printed = "\n".join(line.rstrip() for line in proc.stdout.strip().splitlines())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"$ nsys-llm-explain --help\n{printed}\n" in readme


def test_rule_catalog_lists_every_rule() -> None:
    from nsys_llm_explainer.rules import RULES

    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for rule in RULES:
        assert f"## {rule.id}" in text
        assert rule.doc.splitlines()[0] in text


def _ci_commands() -> tuple[str, str]:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    install = re.search(r'^INSTALL_CMD="([^"]+)"', script, re.M)
    test = re.search(r'^TEST_CMD="([^"]+)"', script, re.M)
    assert install and test, ".ci/run must define INSTALL_CMD and TEST_CMD"
    return install.group(1), test.group(1)


def test_readme_setup_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    block = setup.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    commands = [c for c in commands if c]
    assert commands == list(_ci_commands()), "README set-up commands and .ci/run disagree"


def test_makefile_has_documented_targets() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in (
        "install",
        "test",
        "lint",
        "example",
        "bench",
        "bench-large",
        "docs",
        "docs-check",
    ):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), target


def _keys(schema: dict[str, Any], defs: dict[str, Any]) -> set[str]:
    """Every property name of an object schema, through $defs references and array items."""
    out: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if "$ref" in node:
            stack.append(defs[node["$ref"].rsplit("/", 1)[-1]])
            continue
        if "items" in node:
            stack.append(node["items"])
        for name, sub in node.get("properties", {}).items():
            out.add(name)
            stack.append(sub)
    return out


@pytest.mark.parametrize("metric_id", CORE_METRICS)
def test_core_metric_page_names_every_key(metric_id: str) -> None:
    frag = load_fragment(metric_id)
    page = (ROOT / "docs" / "metrics" / f"{metric_id}.md").read_text(encoding="utf-8")
    missing = sorted(k for k in _keys(frag, frag.get("$defs", {})) if k not in page)
    assert not missing, f"docs/metrics/{metric_id}.md does not mention {missing}"
