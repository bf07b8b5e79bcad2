""".ci/run is a new machine: the README's commands run with a new, empty home directory, so the
tool's caches start empty, while pip keeps its download cache."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.fresh import ROOT

# Stands in for the README's commands: records what it finds, and the test command writes a
# one-test JUnit file where .ci/run asks for it (PYTEST_ADDOPTS --junitxml=...).
PROBE = r'''
import json, os, pathlib, sys
home = pathlib.Path(os.environ["HOME"])
cache = pathlib.Path(os.environ["XDG_CACHE_HOME"])
seen = {
    "home": str(home),
    "home_entries": sorted(p.name for p in home.iterdir()) if home.is_dir() else None,
    "cache": str(cache),
    "cache_entries": sorted(str(p) for p in cache.rglob("*")) if cache.is_dir() else [],
    "pip_cache": os.environ.get("PIP_CACHE_DIR"),
    "tool_variables": [k for k in os.environ if k.startswith("NSYS_LLM_EXPLAIN_")],
}
with open(sys.argv[1], "a") as fh:
    fh.write(json.dumps(seen) + "\n")
cache.mkdir(parents=True, exist_ok=True)
(cache / "nsys-llm-explain").mkdir(exist_ok=True)
(cache / "nsys-llm-explain" / "left-by-this-run").write_text("x")
for word in os.environ.get("PYTEST_ADDOPTS", "").split():
    if word.startswith("--junitxml="):
        pathlib.Path(word.split("=", 1)[1]).write_text(
            '<testsuite tests="1" failures="0" errors="0" skipped="0"><testcase name="t"/></testsuite>')
'''


def test_ci_runs_the_readme_commands_on_empty_caches(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    log = tmp_path / "seen.jsonl"
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    for name in ("INSTALL_CMD", "TEST_CMD"):
        start = script.index(f'\n{name}="') + 1
        end = script.index("\n", start)
        script = script[:start] + f'{name}="python3 {probe} {log}"' + script[end:]
    (repo / ".ci" / "run").write_text(script, encoding="utf-8")

    user_home = tmp_path / "user"
    stale = user_home / ".cache" / "nsys-llm-explain" / "templates-stale"
    stale.mkdir(parents=True)
    (stale / "entry.cache").write_text("left by an earlier run")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSYS_LLM_EXPLAIN_", "PIP_CACHE_DIR"))}
    env.update(HOME=str(user_home), XDG_CACHE_HOME=str(user_home / ".cache"), NSYS_LLM_EXPLAIN_NO_CACHE="1")
    for _ in range(2):  # a second run finds nothing the first one left
        proc = subprocess.run(["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "ci: PASS: 1 passed" in proc.stdout

    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(seen) == 4  # two commands, two runs
    for s in seen:
        assert not Path(s["home"]).is_relative_to(user_home)
        assert Path(s["cache"]).is_relative_to(Path(s["home"]))
        assert s["tool_variables"] == []
        assert s["pip_cache"]
        assert not Path(s["pip_cache"]).is_relative_to(Path(s["home"]))  # pip's cache is kept
    first_install, first_test, second_install, _ = seen
    assert first_install["home_entries"] == [] and first_install["cache_entries"] == []
    assert first_test["cache_entries"]  # one run's commands share its cache
    assert second_install["home_entries"] == [] and second_install["cache_entries"] == []
    assert first_install["home"] != second_install["home"]
    assert not Path(first_install["home"]).exists()  # removed when the run ends
    assert (stale / "entry.cache").read_text() == "left by an earlier run"  # the user's home untouched
