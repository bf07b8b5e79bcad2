"""The import contracts (pyproject.toml [tool.importlinter]): each package imports only from
the layers below it, and one metric module never imports another, imports inside functions
included. `make lint` checks them too."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_layers_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = pytest.importorskip(
        "importlinter.cli", reason="import-linter is not installed (pip install -e '.[test]' installs it)"
    )
    monkeypatch.chdir(ROOT)
    # import-linter caches the import graph in the working directory: keep the checkout clean
    code = cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=str(tmp_path), no_logo=True)
    assert code == 0, (
        "a module imports from a layer above its own, or a metric from another metric; the "
        "contracts' report is above"
    )


def test_imports_inside_functions_are_in_the_graph_the_contract_checks() -> None:
    """A late import is still an import: the report command loads the analysis inside
    write_report (cli/report.py), and the graph import-linter checks has that edge."""
    grimp = pytest.importorskip("grimp", reason="import-linter is not installed")
    graph = grimp.build_graph("nsys_llm_explainer", cache_dir=None)
    assert graph.direct_import_exists(
        importer="nsys_llm_explainer.cli.report", imported="nsys_llm_explainer.api"
    )
