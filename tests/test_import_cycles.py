"""No import cycle in the package: every import counts, at the top of a module, inside a
function or under TYPE_CHECKING. The graph is read from the source (ast), so an import that
only runs late, or only for the type checker, is an edge like any other."""

from __future__ import annotations

import ast
from pathlib import Path

import nsys_llm_explainer

PACKAGE = Path(nsys_llm_explainer.__file__).resolve().parent

# Cycles still being broken elsewhere, each to be removed from this list when it is: the test
# below fails once one of them is gone, so the list never outlives its cycles.
KNOWN: set[frozenset[str]] = set()


def modules(package: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name (relative to the package's parent) -> (file, is a package's __init__)."""
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_init = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_init else parts)] = (path, is_init)
    return out


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a `from pkg import name` of a submodule is
    an edge to that submodule; any other name, to the module that defines it)."""
    mods = modules(package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, (path, is_init) in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".") if is_init else name.split(".")[:-1]
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def _short(component: list[str]) -> frozenset[str]:
    return frozenset(m.removeprefix(PACKAGE.name + ".") for m in component)


def test_no_import_cycle() -> None:
    found = {_short(c) for c in cycles(import_graph(PACKAGE))}
    assert found - KNOWN == set(), "modules that import each other, directly or around a loop"


def test_each_known_cycle_is_still_there() -> None:
    found = {_short(c) for c in cycles(import_graph(PACKAGE))}
    assert KNOWN - found == set(), "a cycle listed in KNOWN is gone: remove it from the list"


def test_a_late_or_type_only_import_closes_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nVERSION = 1\nif TYPE_CHECKING:\n    from pkg.api import x\n"
    )
    (pkg / "api.py").write_text("from pkg import VERSION, sub\nfrom pkg.sub.b import y\nx = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from .b import y\n    return y\n")
    (pkg / "sub" / "b.py").write_text("from pkg.sub import a\ny = 2\n")
    (pkg / "sub" / "c.py").write_text("from ..sub import b\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub.c"] == {"pkg.sub.b"}
    assert graph["pkg.api"] == {"pkg", "pkg.sub", "pkg.sub.b"}
    assert sorted(cycles(graph)) == [["pkg", "pkg.api"], ["pkg.sub.a", "pkg.sub.b"]]
