"""Facts a Kineto trace carries besides its events: GPUs, ranks, versions, step names.

Some writers store deviceProperties as a Python literal in a string ("[{'id': 0, ...}]")
instead of a JSON list; both are read. Values of the wrong type become None, never errors.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

from nsys_llm_explainer.model import GpuInfo, TraceFormat
from nsys_llm_explainer.trace.kineto.collect import RUNTIME, Collected

# Top-level keys reported as the trace's version facts (all optional).
VERSION_KEYS = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
                "hip_runtime_version", "roctracer_version", "rocm_version", "displayTimeUnit",
                "baseTimeNanoseconds")
# Top-level keys the PyTorch profiler itself writes, shown with --include-capture-info. All
# other top-level keys (user metadata, trace names that are paths) are never shown.
PROFILER_SETTINGS = (*VERSION_KEYS, "record_shapes", "profile_memory", "with_stack", "with_flops",
                     "with_modules")
MAX_SETTING_CHARS = 100
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
MAX_LITERAL_CHARS = 1 << 20


def profiler_step(name: str) -> int:
    """N of a 'ProfilerStep#N' range name, else -1."""
    m = _STEP.match(name or "")
    return int(m.group(1)) if m and len(m.group(1)) < 18 else -1


def _literal(value: Any) -> Any:
    """A JSON value, or the Python literal a string holds (None when it holds none)."""
    if isinstance(value, str):
        if len(value) > MAX_LITERAL_CHARS:
            return None
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    return value


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


ROCM_KEYS = (
    "hip_runtime_version", "roctracer_version", "rocm_version", "hip_driver_version", "rocprofiler-sdk_version",
)
# AMD GPUs report their gfx version as the compute capability: 9.4 is gfx940-942 (CDNA3).
AMD_SERIES = {"9.0": "gfx90x (MI100/MI200 series)", "9.4": "gfx94x (MI300 series)", "9.5": "gfx950 (MI350 series)"}


def vendor(top: dict[str, Any], props: list[Any]) -> str | None:
    """amd for a ROCm trace (HIP or roctracer version keys, 64-wide wavefronts, an AMD name),
    nvidia for a CUDA one, else None."""
    if any(k in top for k in ROCM_KEYS):
        return "amd"
    for p in props:
        if isinstance(p, dict) and (_int(p.get("warpSize")) == 64 or "AMD" in str(p.get("name") or "")):
            return "amd"
    if any(k in top for k in ("cuda_runtime_version", "cuda_driver_version", "cupti_version")):
        return "nvidia"
    return None


def _amd_name(cc: str | None, sms: int | None, mem: int | None) -> str | None:
    """A descriptive name for an AMD GPU whose deviceProperties name is empty (ROCm leaves it
    empty where it cannot map the device id to a marketing name): its gfx series, compute
    units and memory. Never a guessed model: peak figures stay unknown."""
    series = AMD_SERIES.get(cc or "")
    if series is None and cc is None:
        return None
    parts = [p for p in (f"{sms} CUs" if sms else None,
                         f"{mem / 2**30:.0f} GiB" if mem else None) if p]
    what = series or (f"gfx{cc.replace('.', '')}x" if cc else "of unknown series")
    return f"AMD GPU {what}" + (f", {', '.join(parts)}" if parts else "") + " (name not recorded)"


def gpus(top: dict[str, Any]) -> list[GpuInfo]:
    """deviceProperties -> GpuInfo per device id (first entry wins). An empty name is None,
    except on an AMD GPU, which gets a descriptive name from its gfx version, compute units
    and memory (_amd_name)."""
    props = _literal(top.get("deviceProperties"))
    if not isinstance(props, list):
        return []
    kind = vendor(top, props)
    out: dict[int, GpuInfo] = {}
    for p in props:
        if not isinstance(p, dict):
            continue
        dev = _int(p.get("id"))
        if dev is None or dev < 0 or dev in out:
            continue
        name = p.get("name")
        major, minor = _int(p.get("computeMajor")), _int(p.get("computeMinor"))
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        sms, mem = _int(p.get("numSms")), _int(p.get("totalGlobalMem"))
        text = name.strip() or None if isinstance(name, str) else None
        if text is None and kind == "amd":
            text = _amd_name(cc, sms, mem)
        out[dev] = GpuInfo(
            device_id=dev,
            name=text,
            sm_count=sms,
            total_memory_bytes=mem,
            compute_capability=cc,
            vendor=kind,
        )
    return [out[d] for d in sorted(out)]


def distributed(top: dict[str, Any]) -> dict[str, Any] | None:
    """distributedInfo: rank, world size and backend (None when the trace has none)."""
    info = _literal(top.get("distributedInfo"))
    if not isinstance(info, dict):
        return None
    backend = info.get("backend")
    return {
        "rank": _int(info.get("rank")),
        "world_size": _int(info.get("world_size")),
        "backend": backend if isinstance(backend, str) else None,
    }


def format_info(top: dict[str, Any]) -> dict[str, Any]:
    """The version fields the trace has, as written (ints or text; others dropped)."""
    out: dict[str, Any] = {}
    for key in VERSION_KEYS:
        value = top.get(key)
        if isinstance(value, bool) or not isinstance(value, int | str):
            continue
        out[key] = value if isinstance(value, int) or len(value) <= 100 else value[:100]
    return out


def profiler_settings(top: dict[str, Any]) -> list[dict[str, str]]:
    """PROFILER_SETTINGS the trace has, as name/value text (numbers and short text only)."""
    out = []
    for key in PROFILER_SETTINGS:
        value = top.get(key)
        if isinstance(value, bool | int):
            out.append({"name": key, "value": str(value).lower() if isinstance(value, bool) else str(value)})
        elif isinstance(value, str) and value.strip():
            out.append({"name": key, "value": value[:MAX_SETTING_CHARS]})
    return out


def base_time_ns(top: dict[str, Any]) -> int | None:
    """baseTimeNanoseconds: the epoch time in ns that timestamps count from (None when
    absent or not a positive integer)."""
    value = _int(top.get("baseTimeNanoseconds"))
    return value if value is not None and 0 < value < 1 << 62 else None


def process_names(events: list[dict[str, Any]]) -> dict[Any, str]:
    """pid value -> name from `process_name` metadata events."""
    out: dict[Any, str] = {}
    for e in events:
        args = e.get("args")
        if e.get("name") == "process_name" and isinstance(args, dict) and isinstance(args.get("name"), str):
            pid = e.get("pid")
            if isinstance(pid, int | str):
                out.setdefault(pid, args["name"])
    return out


def bad_event_warnings(bad: Counter[str]) -> list[str]:
    return [
        f"{kind}: {n} events ignored (no usable ts, a dur that is not a number, a negative dur, a time "
        "beyond 2^62 ns, or an id or size beyond 64 bits)"
        for kind, n in sorted(bad.items())
    ]


def limitations(collected: Collected, kernels: int) -> list[str]:
    """What a PyTorch profiler trace cannot tell, as report limitations (docs/kineto.md);
    `kernels`: how many kernel events it holds."""
    out = [
        f"Read from a {TraceFormat.KINETO.label}: NVTX-based sections use its host ranges "
        "(user_annotation and cpu_op events) as NVTX ranges.",
        "PyTorch profiler traces record no CUDA graph trace mode, no GPU clocks or memory "
        "bandwidth, and no profiler diagnostics; copy source and destination devices are "
        "unknown.",
    ]
    if kernels and not len(collected.tables[RUNTIME]):
        out.append("The trace has kernels but no cuda_runtime/cuda_driver events: launches are not measured.")
    return out
