"""Each kernel's achieved rate as a share of its own GPU's peak, for pairs run on different GPUs.

A kernel 30% slower on another GPU says little by itself; beside it, how close each side came
to its own GPU's peak says whether the kernel used both GPUs alike. Read from each report's
`metrics.compute_efficiency` (its `kernels` and its `devices`' peaks, docs/metrics/
compute_efficiency.md): for a kernel bound by compute (its FLOPs per byte at or beyond its GPU's
ridge point) its achieved FLOP/s over the peak FLOP/s of the precision it computes in; else its
achieved bytes/s over the peak memory bandwidth. Summed over devices and names by kernel time.
A kernel the report has no FLOPs or bytes for has none ("not computed").
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.diff.load import Side


def _device_peaks(m: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    return {d.get("device_id"): d for d in m.get("devices") or [] if isinstance(d, dict)}


def _one(row: dict[str, Any], dev: dict[str, Any] | None) -> tuple[float, str] | None:
    if dev is None:
        return None
    if row.get("bound") == "compute" and row.get("tflops"):
        dtype = row.get("math_dtype") or row.get("compute_dtype")
        peak = (dev.get("peak_tflops") or {}).get(dtype)
        return (100.0 * float(row["tflops"]) / float(peak), "FLOP/s") if peak else None
    if row.get("gbps") and dev.get("hbm_gbps"):
        return 100.0 * float(row["gbps"]) / float(dev["hbm_gbps"]), "bytes/s"
    return None


def of_side(side: Side) -> dict[str, tuple[float, float, str]]:
    """kernel name -> (weight: kernel ns, % of peak, "FLOP/s" or "bytes/s")."""
    m = side.metric("compute_efficiency")
    if m is None:
        return {}
    devices = _device_peaks(m)
    acc: dict[str, list[Any]] = {}
    for row in m.get("kernels") or []:
        if not isinstance(row, dict) or row.get("implausible"):
            continue
        got = _one(row, devices.get(row.get("device_id")))
        if got is None:
            continue
        w = float(row.get("kernel_ns") or 0)
        a = acc.setdefault(str(row.get("name")), [0.0, 0.0, got[1]])
        a[0] += w
        a[1] += w * got[0]
    return {n: (w, s / w, what) for n, (w, s, what) in acc.items() if w > 0}


def of_names(table: dict[str, tuple[float, float, str]], names: object, sep: str) -> dict[str, Any]:
    """The % of peak of one row's names (weighted by kernel time), or None."""
    if not isinstance(names, str) or not names:
        return {"pct": None, "of": None}
    found = [table[n] for n in names.split(sep) if n in table]
    weight = sum(f[0] for f in found)
    if not weight:
        return {"pct": None, "of": None}
    kinds = {f[2] for f in found}
    return {"pct": round(sum(f[0] * f[1] for f in found) / weight, 2),
            "of": kinds.pop() if len(kinds) == 1 else "mixed"}
