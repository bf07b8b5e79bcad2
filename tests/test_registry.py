"""Registry checks over all members at once: every metric has its schema fragment, template
and docs page; every rule has a unique, well-formed id and a documented docstring."""

from __future__ import annotations

import dataclasses
import importlib
import re
import types
from importlib import resources
from pathlib import Path

import pytest

from nsys_llm_explainer.metrics import REGISTRY, Metric
from nsys_llm_explainer.rules import RULES, Rule
from nsys_llm_explainer.schema import fragment_ids

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "metrics"
RULE_ID = re.compile(r"^NLE\d{3}$")
METRIC_ID = re.compile(r"^[a-z][a-z0-9_]*$")
METRIC_IDS = [m.id for m in REGISTRY]
RULE_IDS = [r.id for r in RULES]


def test_metric_ids_unique_and_well_formed() -> None:
    assert len(METRIC_IDS) == len(set(METRIC_IDS)), METRIC_IDS
    assert all(METRIC_ID.match(m) for m in METRIC_IDS), METRIC_IDS


def test_csv_stems_unique_across_metrics() -> None:
    stems = [stem for m in REGISTRY for stem in m.tables]
    assert len(stems) == len(set(stems)), sorted(s for s in stems if stems.count(s) > 1)


@pytest.mark.parametrize("metric_id", METRIC_IDS)
def test_metric_has_fragment(metric_id: str) -> None:
    assert metric_id in fragment_ids(), (
        f"missing src/nsys_llm_explainer/schema/metrics/{metric_id}.json"
    )


@pytest.mark.parametrize("metric_id", METRIC_IDS)
def test_metric_has_template(metric_id: str) -> None:
    template = resources.files("nsys_llm_explainer").joinpath(
        "templates", "metrics", f"{metric_id}.md.j2"
    )
    assert template.is_file(), f"missing templates/metrics/{metric_id}.md.j2"


@pytest.mark.parametrize("metric_id", METRIC_IDS)
def test_metric_has_docs_page(metric_id: str) -> None:
    page = DOCS / f"{metric_id}.md"
    assert page.is_file(), f"missing docs/metrics/{metric_id}.md"
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# "), "a docs page starts with a title"
    assert metric_id in text.splitlines()[0], "the title names the metric id"


@pytest.mark.parametrize("metric", REGISTRY, ids=lambda m: m.id)
def test_metric_declares_title_and_description(metric: Metric) -> None:
    assert metric.title.strip()
    assert metric.description.strip()
    for stem, columns in metric.tables.items():
        assert re.match(r"^[a-z][a-z0-9_]*$", stem), stem
        assert columns and len(columns) == len(set(columns)), (stem, columns)


def test_rule_ids_unique() -> None:
    assert len(RULE_IDS) == len(set(RULE_IDS)), RULE_IDS
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)), names


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_well_formed(rule: Rule) -> None:
    rid = rule.id
    assert RULE_ID.match(rid), f"{rid} does not match NLE\\d{{3}}"
    assert re.match(r"^[a-z][a-z0-9-]*$", rule.name), rule.name
    assert rule.title.strip()
    unknown = set(rule.metric_ids) - set(METRIC_IDS)
    assert rule.metric_ids and not unknown, f"{rid} reads unknown metrics {unknown}"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_docstring_has_example(rule: Rule) -> None:
    doc: str = rule.doc
    rid: str = rule.id
    assert doc, f"{rid}: check() has no docstring (it is the rule's documentation page)"
    lines = doc.splitlines()
    assert lines[0].strip() and not lines[0].startswith(" "), "a one-line summary comes first"
    assert "Example:" in [line.strip() for line in lines], f"{rid}: no 'Example:' block"
    after = lines[[line.strip() for line in lines].index("Example:") + 1 :]
    example = [line for line in after if line.strip()]
    assert example and all(line.startswith("    ") for line in example), (
        f"{rid}: the example must be indented"
    )
    assert any(rid in line for line in example), f"{rid}: the example shows output of this rule"


def test_every_rule_is_registered_under_its_id() -> None:
    """A topic module lists each rule it defines in its RULES; the rule's constant is its id
    and its check function is named for it."""
    from nsys_llm_explainer.rules import TOPICS

    for topic in TOPICS:
        defined = {name: v for name, v in vars(topic).items() if isinstance(v, Rule)}
        assert set(defined.values()) == set(topic.RULES), topic.__name__
        for name, rule in defined.items():
            assert name == rule.id, f"{rule.id} is defined as {name}"
            assert rule.check.__module__ == topic.__name__
            assert rule.check.__name__ == rule.name.replace("-", "_"), rule.id


def test_every_metric_module_runs() -> None:
    """metrics/ is one module per metric (each defines METRIC, with the helpers only it uses)
    and the interface; ORDER names each once. That one metric's code never imports another's
    is the independence contract in pyproject.toml (tests/test_layers.py runs it)."""
    import pkgutil

    from nsys_llm_explainer import metrics
    from nsys_llm_explainer.metrics import ORDER

    modules = {m.name for m in pkgutil.iter_modules(metrics.__path__)} - {"base"}
    assert modules == set(ORDER)
    assert len(ORDER) == len(set(ORDER))
    assert [m.id for m in REGISTRY] == [
        importlib.import_module(f"nsys_llm_explainer.metrics.{name}").METRIC.id for name in ORDER
    ]


def test_metric_places_are_distinct_and_come_after_what_each_reads() -> None:
    """REGISTRY is sorted by METRIC.order, no two metrics share a place, a metric comes after
    the metrics it reads both in the report and in the run, and run_after names a metric."""
    from nsys_llm_explainer.metrics import in_run_order

    orders = [m.order for m in REGISTRY]
    assert orders == sorted(orders) and len(set(orders)) == len(orders) and min(orders) > 0
    place = {m.id: m.order for m in REGISTRY}
    ran = [m.id for m in in_run_order(REGISTRY)]
    for m in REGISTRY:
        assert all(place[d] < m.order and ran.index(d) < ran.index(m.id) for d in m.after if d in place), m.id
        assert m.run_after is None or m.run_after in place, m.id


def test_two_metrics_with_one_place_are_refused(monkeypatch) -> None:
    from nsys_llm_explainer import metrics

    twin = dataclasses.replace(REGISTRY[1], order=REGISTRY[0].order)
    real = importlib.import_module

    def fake(name: str, package: str | None = None):
        module = real(name, package)
        if name.endswith(".launch_storm"):
            return types.SimpleNamespace(METRIC=twin)
        return module

    monkeypatch.setattr(metrics.importlib, "import_module", fake)
    with pytest.raises(ValueError, match="share the place order=10"):
        metrics._found()


def test_metrics_are_independent_under_the_import_contract() -> None:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    independent = [c for c in contracts if c["type"] == "independence"]
    assert [c["modules"] for c in independent] == [["nsys_llm_explainer.metrics.*"]]
    assert independent[0].get("ignore_imports") == [
        "nsys_llm_explainer.metrics.* -> nsys_llm_explainer.metrics.base"
    ]
