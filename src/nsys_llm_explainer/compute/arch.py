"""The GPU architecture family, from the compute capability or, when an export has no GPU
information, from the kernel names (a kernel built for sm_XY runs only on sm_XY or newer).

Kernel-name evidence gives a lower bound: "sm90_xmma_gemm_..." proves a Hopper-class GPU or
newer; FlashAttention-2 or cuBLAS "sm80_" kernels also run on Hopper. The result is always
labelled inferred, carries the names that decided it, and maps to a representative GPU's
peaks only with an explicit "assumed" label (peaks.resolve does that).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from nsys_llm_explainer.frozen import frozen

# (family, lowest compute capability x10) in ascending order.
FAMILIES = (
    ("volta", 70),
    ("turing", 75),
    ("ampere", 80),
    ("ada", 89),
    ("hopper", 90),
    ("blackwell", 100),
)
# A representative GPU per family (an exact name of the built-in table), for assumed peaks.
REPRESENTATIVE = {
    "volta": "Tesla V100-SXM2-32GB",
    "turing": "Tesla T4",
    "ampere": "NVIDIA A100-SXM4-80GB",
    "ada": "NVIDIA L40S",
    "hopper": "NVIDIA H100 80GB HBM3",
    "blackwell": "NVIDIA B200",
}
# Explicit SM numbers: cuBLAS/cuDNN "sm90_xmma_...", CUTLASS "cutlass3x_sm90_...",
# "cutlass::arch::Sm80", nvjet "nvjet_sm100_...", "cutlass_80_tensorop_...".
_SM = re.compile(r"(?<![a-z0-9])(?:sm_?|cutlass_)(\d{2,3})[a-z]?(?=_|\b|[^0-9])", re.IGNORECASE)
# Family words cuBLAS/cuDNN put in kernel names, and instruction names only one family has.
_WORDS = (
    (re.compile(r"(?<![a-z])volta_|h884|s884", re.IGNORECASE), 70),
    (re.compile(r"(?<![a-z])turing_|h1688gemm|s1688gemm|i8816", re.IGNORECASE), 75),
    (re.compile(r"(?<![a-z])ampere_|cudnn_ampere|s16816gemm|h16816gemm", re.IGNORECASE), 80),
    (re.compile(r"(?<![a-z])hopper|wgmma|(?<![a-z])nvjet", re.IGNORECASE), 90),
    (re.compile(r"(?<![a-z])blackwell|tcgen05", re.IGNORECASE), 100),
)
MAX_EVIDENCE = 3


@frozen
class ArchInference:
    family: str  # the newest family the evidence requires ("hopper")
    min_sm: int  # compute capability x10 that much evidence proves (90)
    evidence: tuple[str, ...]  # kernel names that required it (at most MAX_EVIDENCE)
    inferred: bool  # True: from kernel names (a lower bound); False: from compute capability
    note: str


def family_of_sm(sm: int) -> str | None:
    """Family of a compute capability x10 (86 -> "ampere", 120 -> "blackwell")."""
    found = None
    for family, low in FAMILIES:
        if sm >= low:
            found = family
    return found


def from_compute_capability(major: int, minor: int) -> ArchInference | None:
    """Exact family from the device's compute capability (TARGET_INFO_GPU, deviceProperties)."""
    sm = major * 10 + minor
    family = family_of_sm(sm)
    if family is None:
        return None
    return ArchInference(family, sm, (), False, f"compute capability {major}.{minor}")


def kernel_min_sm(name: str) -> int | None:
    """The compute capability (x10) a kernel name requires, or None when it names none."""
    best = None
    for m in _SM.finditer(name):
        sm = int(m.group(1))
        if 50 <= sm <= 130:
            best = max(best or 0, sm)
    for rx, sm in _WORDS:
        if rx.search(name):
            best = max(best or 0, sm)
    return best


def infer_from_kernels(names: Iterable[str]) -> ArchInference | None:
    """The newest family the kernel names require, with the names that show it; None when
    no name carries architecture evidence."""
    best, evidence = 0, list[str]()
    for name in names:
        sm = kernel_min_sm(name)
        if sm is None or sm < best:
            continue
        if sm > best:
            best, evidence = sm, []
        if len(evidence) < MAX_EVIDENCE and name not in evidence:
            evidence.append(name)
    family = family_of_sm(best) if best else None
    if family is None:
        return None
    note = (
        f"inferred from kernel names: sm_{best} kernels run only on {family} or newer GPUs; "
        "the exact GPU model is unknown"
    )
    return ArchInference(family, best, tuple(evidence), True, note)


# AMD GPUs report their gfx version as the compute capability (9.4: gfx940-942).
AMD_FAMILIES = {"9.0": "cdna2", "9.4": "cdna3", "9.5": "cdna4"}
FAMILY_WORDS = {
    "volta": "Volta", "turing": "Turing", "ampere": "Ampere", "ada": "Ada", "hopper": "Hopper",
    "blackwell": "Blackwell", "cdna2": "CDNA2", "cdna3": "CDNA3", "cdna4": "CDNA4",
}
_ROCM_KERNEL = re.compile(r"^(custom_)?cijk_|(^|[^a-z])(ck|ck_tile|aiter)::|hipblaslt|rocblas", re.IGNORECASE)


@frozen
class GpuArch:
    """The architecture precision advice is keyed by: vendor, family, and how it is known."""

    vendor: str | None  # "nvidia", "amd" or None
    family: str | None  # a FAMILIES or AMD_FAMILIES value, None when unknown
    exact: bool  # False: a lower bound from kernel names (this family or newer)
    why: str  # the evidence, for the report

    def to_json(self) -> dict[str, object]:
        return {"vendor": self.vendor, "family": self.family, "exact": self.exact, "why": self.why}


def resolve(
    gpus: Iterable[object], kernel_names: Iterable[str], family_of_name: Callable[[str], str | None]
) -> GpuArch:
    """The architecture of the GPUs that ran the work: by the GPU's name in the peak table
    (family_of_name), else its compute capability, else what its kernel names require (a lower
    bound); AMD when the trace or its kernels say ROCm."""
    listed = [g for g in gpus if getattr(g, "name", None) or getattr(g, "compute_capability", None)]
    names = list(kernel_names)
    amd = any(getattr(g, "vendor", None) == "amd" for g in listed) or any(_ROCM_KERNEL.search(n) for n in names[:200])
    for g in listed:
        name = getattr(g, "name", None)
        family = family_of_name(name) if name else None
        if family:
            return GpuArch("amd" if family.startswith("cdna") else "nvidia", family, True,
                           f"{name} ({FAMILY_WORDS.get(family, family)})")
    for g in listed:
        cc = getattr(g, "compute_capability", None)
        if not cc:
            continue
        if amd:
            family = AMD_FAMILIES.get(cc)
            return GpuArch("amd", family, family is not None,
                           f"AMD GPU, gfx version {cc}" + (f" ({FAMILY_WORDS[family]})" if family else ""))
        major, _, minor = cc.partition(".")
        if major.isdigit() and minor.isdigit():
            family = family_of_sm(int(major) * 10 + int(minor))
            if family:
                return GpuArch("nvidia", family, True, f"compute capability {cc} ({FAMILY_WORDS[family]})")
    if amd:
        return GpuArch("amd", None, False, "a ROCm trace (AMD GPU; its model is not recorded)")
    inferred = infer_from_kernels(names)
    if inferred is not None:
        return GpuArch("nvidia", inferred.family, False,
                       f"the GPU model is not recorded; its kernels are built for sm_{inferred.min_sm}: "
                       f"{FAMILY_WORDS[inferred.family]} or newer")
    return GpuArch(None, None, False, "neither the GPU model nor an architecture in the kernel names is recorded")
