"""Template families: every template is compiled only in an environment made with all the
filters it uses, and a run compiles only the templates it renders.

The static checks read each template's syntax tree, so they hold whatever the compiled-template
cache holds; the subprocess check warms every writer on an empty cache, as a new machine does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
from jinja2 import meta, nodes

from nsys_llm_explainer.diff import render as diff_render
from nsys_llm_explainer.render import Format, html, templates, writers
from nsys_llm_explainer.render import ncu as ncu_render
from nsys_llm_explainer.render.templates import markdown_environment, report_environment


def family_environments() -> dict[str, jinja2.Environment]:
    """Each family's environment, as the writers make it."""
    return {
        templates.REPORT_MD.name: report_environment(),
        templates.REPORT_HTML.name: html.environment(),
        templates.DIFF_MD.name: diff_render.environment(),
        templates.DIFF_HTML.name: diff_render.html_environment(),
        templates.NCU_MD.name: ncu_render.environment(),
    }


def test_every_family_has_its_environment() -> None:
    envs = family_environments()
    assert set(envs) == set(templates.FAMILIES)
    for name, env in envs.items():
        assert isinstance(env.loader, templates.FamilyLoader)
        assert env.loader.family is templates.FAMILIES[name]


def test_every_template_belongs_to_a_family() -> None:
    shipped = templates.all_templates()
    assert "diff.md.j2" in shipped and "report.md.j2" in shipped
    orphans = [t for t in shipped if not any(f.holds(t) for f in templates.FAMILIES.values())]
    assert orphans == []
    for family in templates.FAMILIES.values():
        for root in family.roots:
            assert root in shipped and family.holds(root)


def _used(ast: nodes.Template) -> tuple[set[str], set[str]]:
    filters = {n.name for n in ast.find_all(nodes.Filter)}
    # `{% filter upper %}` blocks hold their filter as a Filter node too; tests are `is name`.
    tests = {n.name for n in ast.find_all(nodes.Test)}
    return filters, tests


@pytest.mark.parametrize("family", sorted(templates.FAMILIES))
def test_each_template_uses_only_its_environments_filters(family: str) -> None:
    """What the cold-cache crash was: a template compiled in an environment without its filter.
    Jinja defers an unknown filter inside {% if %} to run time, so the tree is read, not only
    compiled."""
    env = family_environments()[family]
    names = templates.names(env)
    assert names, family
    for name in names:
        source, _, _ = env.loader.get_source(env, name)
        ast = env.parse(source, name)
        filters, tests = _used(ast)
        assert filters <= set(env.filters), (name, sorted(filters - set(env.filters)))
        assert tests <= set(env.tests), (name, sorted(tests - set(env.tests)))
        for ref in meta.find_referenced_templates(ast):
            assert ref is not None, f"{name} includes a template named at run time"
            assert templates.FAMILIES[family].holds(ref), (name, ref)
        env.compile(source, name)  # compiles here, never from the cache


def test_a_family_cannot_load_another_familys_templates() -> None:
    envs = family_environments()
    with pytest.raises(jinja2.TemplateNotFound):
        envs["report-md"].get_template("diff.md.j2")
    with pytest.raises(jinja2.TemplateNotFound):
        envs["diff-md"].get_template("report.md.j2")
    with pytest.raises(jinja2.TemplateNotFound):
        envs["report-html"].get_template("metrics/top_kernels.md.j2")
    assert "diff.md.j2" not in templates.names(envs["report-md"])


def test_families_cache_in_separate_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(templates.NO_CACHE_ENV, raising=False)
    folders = set()
    for name, env in family_environments().items():
        cache = templates.bytecode_cache(name, env)
        assert cache is not None
        folders.add(cache.folder)  # type: ignore[attr-defined]
    assert len(folders) == len(templates.FAMILIES)
    # One more filter is another environment: code compiled with it is never loaded without it.
    plus = markdown_environment(templates.REPORT_MD, {"extra": str})
    assert templates.settings_tag(plus) != templates.settings_tag(report_environment())


def _loaded(env: jinja2.Environment) -> set[str]:
    return {key[1] for key in env.cache.keys()} if env.cache is not None else set()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("formats", "md", "md_root"),
    [((Format.MD,), "compact", "report.md.j2"), ((Format.MD,), "full", "report_full.md.j2"),
     ((Format.HTML,), "compact", None), ((Format.JSON, Format.CSV, Format.NCU), "compact", None)],
)
def test_prepare_compiles_only_what_the_run_renders(
    formats: tuple[Format, ...], md: str, md_root: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(templates.NO_CACHE_ENV, "1")
    report_environment.cache_clear()
    html.environment.cache_clear()
    try:
        writers.prepare(formats, md)
        md_env, html_env = report_environment(), html.environment()
        md_loaded, html_loaded = _loaded(md_env), _loaded(html_env)
    finally:
        report_environment.cache_clear()
        html.environment.cache_clear()
    sections = {n for n in templates.names(md_env) if n.startswith("metrics/")}
    if md_root is not None:
        assert md_loaded == set(templates.REPORT_MD.for_root(md_root, templates.names(md_env)))
        other = {"report.md.j2", "report_full.md.j2"} - {md_root}
        assert not md_loaded & other
    elif Format.HTML in formats:
        assert md_loaded == sections  # report.html shows the metric sections only
        assert html_loaded == set(templates.names(html_env))
    else:
        assert md_loaded == set() and html_loaded == set()
    assert "diff.md.j2" not in md_loaded


def test_every_writer_warms_up_on_a_cold_cache(tmp_path: Path) -> None:
    """The first run on a new machine: an empty cache, every writer made ready, every
    template a report, a diff or ncu.md renders compiled in its own environment."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != templates.NO_CACHE_ENV}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    code = (
        "from nsys_llm_explainer.render import Format, writers\n"
        "from nsys_llm_explainer.diff import render\n"
        "from nsys_llm_explainer.render import templates\n"
        "writers.prepare(tuple(Format), 'compact')\n"
        "writers.prepare(tuple(Format), 'full')\n"
        "for e in (render.environment(), render.html_environment()):\n"
        "    templates.warm(e, templates.names(e))\n"
        "from nsys_llm_explainer.render import ncu\n"
        "templates.warm(ncu.environment(), templates.names(ncu.environment()))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    cache = home / ".cache" / "nsys-llm-explain"
    kinds = {p.name.rsplit("-", 1)[0] for p in cache.glob("templates-*/*")}
    assert kinds == set(templates.FAMILIES)
