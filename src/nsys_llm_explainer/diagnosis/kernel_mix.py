"""What the kernels of a GPU-bound capture are limited by, and which kernel dominates.
Reads metric results only (top_kernels, categories, compute_efficiency).

Per kernel name on the devices judged (communication kernels left out: their time is the
communication cause's):
- a GEMM, convolution, attention or MoE kernel placed on the roofline (compute_efficiency,
  where operator shapes are recorded) is bound by the roof it sits under when it reaches at
  least NEAR_ROOF_PCT of it; below, it is far from both roofs (launch, latency or occupancy
  limit it), whatever roof it sits under;
- otherwise by family: bytes-only families (elementwise, copies and casts, reductions, norms,
  layout, pooling, sampling, index and memory kernels, compiler-fused pointwise kernels, FFTs)
  are memory-bound: memory is their only roof; GEMV and decode attention stream their
  operands: memory-bound; other matrix math is compute-bound by family; a kernel of no family
  is memory-bound when the capture runs almost no matrix math (under NO_MATRIX_PCT of its
  kernel time: array loops such as stencils and reductions stream memory), else unknown.

The mix names a class when it holds at least CLASS_PCT of the kernel time outside
communication kernels, else it is mixed. Shares are written over all the devices' kernel time,
communication kernels included (the kernel time the key numbers show: one denominator for
every "% of kernel time"), with communication's own share beside them.
NEAR_ROOF_PCT follows Nsight Compute's speed-of-light guidance: a kernel below 60% of both the
compute and the memory peak is latency-bound rather than limited by either unit.

The dominant kernel is the family of kernel names with the most time: names that share a
function (`par_ranged2d_kernel<...>` instantiations) or a generic launcher's functor
(kernels/demangled.py) count together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nsys_llm_explainer.compute.peaks import NEAR_ROOF_PCT
from nsys_llm_explainer.kernels.categories import BUILTIN_TABLE
from nsys_llm_explainer.kernels.demangled import subjects
from nsys_llm_explainer.model import JsonObject, MetricResult, Outcome, typed_result
from nsys_llm_explainer.results.efficiency import ComputeEfficiency
from nsys_llm_explainer.results.kernels import TopKernels

CLASS_PCT = 60.0
# FLOP per byte from which a matrix product is large on every side: its arithmetic intensity is
# at most about its smallest dimension, so it has no small batch to starve its tiles (and
# enough tiles to fill the GPU): below its roof, the kernel the library picked or the clocks.
LARGE_INTENSITY = 64.0
NO_MATRIX_PCT = 10.0
DOMINANT_PCT = 20.0  # a kernel family is named when it holds at least this share
MEMORY_FAMILIES = frozenset({
    "activation_elementwise", "cast_copy", "memory", "reduction", "norm", "layout", "pooling", "sampling",
    "compiler_fused", "fft",
})
MATRIX_FAMILIES = frozenset({"gemm", "conv", "attention", "moe"})
COMMUNICATION = "communication"
_STREAMING = re.compile(r"gemv|splitkv|split_kv|paged_?att|decode|flash_?decoding", re.IGNORECASE)
CLASSES = ("memory", "compute", "far", "unknown")
LIMIT_WORDS = {
    "memory": "memory-bound kernels",
    "compute": "compute-bound kernels",
    "far": "kernels far from both roofs",
    "mixed": "a mix of kernels",
    "unknown": "kernels of unknown kind",
}


@dataclass
class KernelMix:
    ns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    by_roofline_ns: int = 0  # kernel time classified by the roofline (the rest by family)
    matrix_ns: int = 0
    total_ns: int = 0  # all kernel time, communication kernels included: the shares' base
    comm_ns: int = 0  # communication kernels' time (in no class)
    no_matrix: bool = False  # "memory" for kernels of no family rests on this
    families: dict[str, int] = field(default_factory=dict)  # category -> ns
    dominant: tuple[str, int, int] | None = None  # (family subject or name, ns, kernel names)
    dominant_name: str | None = None  # the full name when the family is one kernel name
    far_large_ns: int = 0  # "far" time in compute-bound matrix math of high arithmetic intensity

    def pct(self, cls: str) -> float:
        """A class's share of all kernel time (communication kernels included)."""
        return 100.0 * self.ns.get(cls, 0) / self.total_ns if self.total_ns else 0.0

    @property
    def comm_pct(self) -> float:
        return 100.0 * self.comm_ns / self.total_ns if self.total_ns else 0.0

    @property
    def compute_ns(self) -> int:
        """Kernel time outside communication kernels: what the classes split."""
        return self.total_ns - self.comm_ns

    @property
    def limit(self) -> str:
        """memory, compute, far, mixed or unknown: a class with CLASS_PCT of the kernel time
        outside communication kernels."""
        if not self.compute_ns:
            return "unknown"
        best = max(CLASSES, key=lambda c: self.ns.get(c, 0))
        return best if 100.0 * self.ns[best] >= CLASS_PCT * self.compute_ns else "mixed"

    @property
    def basis(self) -> str:
        """roofline, families, or both."""
        if self.by_roofline_ns == 0:
            return "families"
        return "roofline" if self.by_roofline_ns >= self.compute_ns else "roofline and families"

    def to_json(self) -> JsonObject:
        return {
            "limit": self.limit,
            "basis": self.basis,
            "kernel_ns": self.total_ns,
            "shares": [{"class": c, "ns": self.ns[c], "pct": round(self.pct(c), 2)} for c in CLASSES if self.ns[c]],
            "no_matrix_math": self.no_matrix,
            "dominant": None if self.dominant is None else {
                "family": self.dominant[0], "name": self.dominant_name, "ns": self.dominant[1],
                "pct": round(100.0 * self.dominant[1] / self.total_ns, 2) if self.total_ns else 0.0,
                "kernel_names": self.dominant[2],
            },
        }


def kernel_class(name: str, family: str, roof: tuple[str, float] | None, no_matrix: bool) -> str:
    """The class of one kernel (module docstring)."""
    if family in MATRIX_FAMILIES:
        if roof is not None:
            bound, pct = roof
            return bound if pct >= NEAR_ROOF_PCT else "far"
        return "memory" if _STREAMING.search(name) else "compute"
    if family in MEMORY_FAMILIES:
        return "memory"
    return "memory" if no_matrix else "unknown"


def classify(rows: Iterable[tuple[str, str, int]], roof: dict[str, tuple[str, float]]) -> KernelMix:
    """rows: (full name, category, ns); roof: full name -> (bound, pct of that roof)."""
    rows = [(n, f, int(ns)) for n, f, ns in rows if ns > 0]
    kept = [(n, f, ns) for n, f, ns in rows if f != COMMUNICATION]
    mix = KernelMix()
    mix.comm_ns = sum(ns for _, f, ns in rows if f == COMMUNICATION)
    compute_ns = sum(ns for *_, ns in kept)
    mix.total_ns = compute_ns + mix.comm_ns
    mix.matrix_ns = sum(ns for _, f, ns in kept if f in MATRIX_FAMILIES)
    mix.no_matrix = bool(compute_ns) and 100.0 * mix.matrix_ns < NO_MATRIX_PCT * compute_ns
    groups: dict[str, list[Any]] = {}
    for name, family, ns in kept:
        r = roof.get(name) if family in MATRIX_FAMILIES else None
        if r is not None:
            mix.by_roofline_ns += ns
        mix.ns[kernel_class(name, family, r, mix.no_matrix)] += ns
        mix.families[family] = mix.families.get(family, 0) + ns
        g = groups.setdefault(subjects(name)[0], [0, set()])
        g[0] += ns
        g[1].add(name)
    if groups:
        key, (ns, names) = max(groups.items(), key=lambda kv: (kv[1][0], kv[0]))
        if compute_ns and 100.0 * ns >= DOMINANT_PCT * compute_ns:
            mix.dominant = (key, ns, len(names))
            mix.dominant_name = next(iter(names)) if len(names) == 1 else None
    return mix


def category_of(metrics: dict[str, Outcome]) -> Callable[[str], str]:
    """Full kernel name -> its category: the categories metric's own table (a user's
    --kernel-categories file included), else the built-in table."""
    known: dict[str, str] = {}
    res = metrics.get("categories")
    for table in res.tables if isinstance(res, MetricResult) else ():
        if table.name == "kernel_category_names" and table.frame is not None:
            known = dict(zip(table.frame["name"].astype(str), table.frame["category"].astype(str), strict=True))

    def category(name: str) -> str:
        if name not in known:
            known[name] = BUILTIN_TABLE.classify([name])[0][0]
        return known[name]

    return category


def of_devices(metrics: dict[str, Outcome], devices: list[int]) -> KernelMix | None:
    """The kernel mix of `devices` (None without per-kernel times)."""
    tk = typed_result(metrics, TopKernels)
    if tk is None:
        return None
    category = category_of(metrics)
    per_name: dict[str, int] = {}
    for r in tk.kernels:
        if r.device_id in devices:
            per_name[r.name] = per_name.get(r.name, 0) + int(r.total_ns)
    roof: dict[str, tuple[str, float]] = {}
    large: set[str] = set()
    ce = typed_result(metrics, ComputeEfficiency)
    for k in ce.kernels if ce is not None else ():
        if k.device_id in devices and k.bound and k.pct_of_roof is not None:
            roof.setdefault(k.name, (str(k.bound), float(k.pct_of_roof)))
            if k.bound == "compute" and float(k.flop_per_byte or 0.0) >= LARGE_INTENSITY:
                large.add(k.name)
    mix = classify(((n, category(n), ns) for n, ns in per_name.items()), roof)
    mix.far_large_ns = sum(ns for n, ns in per_name.items()
                           if n in large and category(n) in MATRIX_FAMILIES and roof[n][1] < NEAR_ROOF_PCT)
    return mix
