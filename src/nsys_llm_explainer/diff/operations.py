"""What operation a kernel implements, so a kernel that changed its name matches its old self.

A library picks another kernel for the same operation when a build, a setting or the input
changes: cuBLAS's `nvjet_hsh_256x128_...` becomes `nvjet_hsh_128x256_...` for the same
`aten::mm`. Such a kernel is one row ("renamed"), not a new kernel and a vanished one. After
exact and normalized names (kernels.py), the names left on each side are matched by their
operation's signature:

- the operator that launched it (report.json `metrics.operators.operator_kernels`: the
  operator holding most of the name's kernel time; PyTorch profiler traces), its category
  (the report's step_work names, else the built-in category table) and, where both reports
  count them (`metrics.compute_efficiency.kernels`), its FLOPs and bytes per call rounded to
  SIGNIFICANT digits: the operation's shapes;
- without an operator (the report records none, or none launched the kernel): the category
  and the name up to its first tile shape
  (digit groups joined by `x`: `nvjet_hsh_` in `nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT`):
  the same library kernel family, its type and precision, at another tile (the tile, the
  cluster shape and the raster order that come with it change together).

Names with no category ("other") or no operator and no tile shape in their name are not
matched this way: a category alone does not say two kernels do the same work. Several names
of one signature on a side make one row (their calls and time summed), as normalized names do.
"""

from __future__ import annotations

import math
import re
from typing import Any

from nsys_llm_explainer.diff.load import Side
from nsys_llm_explainer.kernels.categories import BUILTIN_TABLE, OTHER

SIGNIFICANT = 3
NO_OPERATOR = "(no operator)"
_TILE = re.compile(r"\d+(?:x\d+)+")

Signature = tuple[str, ...]


def _operators(side: Side) -> dict[str, str]:
    """kernel name -> the operator holding most of its kernel time."""
    m = side.metric("operators") or {}
    best: dict[str, tuple[float, str]] = {}
    for row in m.get("operator_kernels") or []:
        if not isinstance(row, dict) or row.get("operator") in (None, NO_OPERATOR):
            continue
        name, ns = str(row.get("kernel")), float(row.get("kernel_ns") or 0)
        if name not in best or ns > best[name][0]:
            best[name] = (ns, str(row["operator"]))
    return {k: v[1] for k, v in best.items()}


def _rounded(x: float) -> str:
    if x <= 0:
        return "0"
    digits = SIGNIFICANT - 1 - math.floor(math.log10(x))
    return f"{round(x, digits):.6g}"


def _work_per_call(side: Side) -> dict[str, str]:
    """kernel name -> FLOPs and bytes per call, rounded (the operation's shapes)."""
    m = side.metric("compute_efficiency") or {}
    acc: dict[str, list[float]] = {}
    for row in m.get("kernels") or []:
        if not isinstance(row, dict) or not isinstance(row.get("calls"), int) or not row["calls"]:
            continue
        a = acc.setdefault(str(row.get("name")), [0.0, 0.0, 0.0])
        a[0] += float(row.get("flops") or 0)
        a[1] += float(row.get("bytes") or 0)
        a[2] += row["calls"]
    return {n: f"{_rounded(f / c)} FLOP, {_rounded(b / c)} B" for n, (f, b, c) in acc.items()}


def _categories(side: Side, names: list[str]) -> dict[str, str]:
    sw = side.metric("step_work") or {}
    known = {str(r.get("name")): str(r.get("category")) for r in sw.get("names") or []
             if isinstance(r, dict) and r.get("category")}
    rest = [n for n in names if n not in known]
    if rest:
        cats, _ = BUILTIN_TABLE.classify(rest)
        known.update(zip(rest, cats, strict=True))
    return {n: known[n] for n in names}


def signatures(base: Side, new: Side, names_b: list[str], names_n: list[str]) -> tuple[
        dict[str, Signature], dict[str, Signature], str]:
    """Each name's signature on each side (names without one are left out), and how they
    were built ("operator" or "tile")."""
    ob, on = _operators(base), _operators(new)
    by_operator = bool(ob) and bool(on)
    wb, wn = _work_per_call(base), _work_per_call(new)
    shapes = bool(wb) and bool(wn)

    def one(side: Side, names: list[str], ops: dict[str, str], work: dict[str, str]) -> dict[str, Signature]:
        cats = _categories(side, names)
        out: dict[str, Signature] = {}
        for n in names:
            cat = cats[n]
            if cat == OTHER:
                continue
            if by_operator and n in ops:
                out[n] = (ops[n], cat, work.get(n, "?") if shapes else "")
            elif (m := _TILE.search(n)) is not None and m.start() > 0:  # no operator launched it
                out[n] = (cat, n[: m.start()])
        return out

    return one(base, names_b, ob, wb), one(new, names_n, on, wn), "operator" if by_operator else "tile"


def how_matched(sig: Signature) -> str:
    """"operator" (operator, category, shapes) or "tile" (category, library family)."""
    return "operator" if len(sig) == 3 else "tile"


def describe(sig: Signature, how: str = "") -> str:
    if len(sig) == 3:
        shapes = f", {sig[2]} per call" if sig[2] and sig[2] != "?" else ""
        return f"{sig[0]} ({sig[1]}{shapes})"
    return f"{sig[0]} kernels {sig[1]}* at another tile"


def row_extra(sig: Signature | None, how: str) -> dict[str, Any]:
    return {"operation": describe(sig, how) if sig else None}
