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
from nsys_llm_explainer.trace.data import CommandLine, ProfilerOptions
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


# AMD Instinct models by what deviceProperties records when ROCm leaves the name empty:
# (gfx major.minor, compute units, memory in GiB) -> the product; the memory matches within
# AMD_MEMORY_TOLERANCE (ROCm reports a little less than the product's HBM). Each signature is
# one product: the MI300X and MI325X differ in memory, the MI300A in compute units.
AMD_MODELS = (
    ("9.4", 304, 192, "AMD Instinct MI300X"),
    ("9.4", 304, 256, "AMD Instinct MI325X"),
    ("9.4", 228, 128, "AMD Instinct MI300A"),
)
AMD_MEMORY_TOLERANCE = 0.04


def _amd_name(cc: str | None, sms: int | None, mem: int | None) -> str | None:
    """A name for an AMD GPU whose deviceProperties name is empty (ROCm leaves it empty where
    it cannot map the device id to a marketing name): the product when its gfx version,
    compute units and memory are one product's (AMD_MODELS), else a description of its gfx
    series, compute units and memory, never a guessed model (peak figures stay unknown)."""
    gib = mem / 2**30 if mem else 0.0
    for model_cc, cus, memory, product in AMD_MODELS:
        if (cc, sms) == (model_cc, cus) and abs(gib - memory) <= AMD_MEMORY_TOLERANCE * memory:
            return product
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


# Fields of the trace's own metadata (top level, or inside a `metadata` object, up to
# META_DEPTH levels down) that name the command line or the model. Read only to name the
# program and the model (analysis/program.py); nothing else of user metadata is used.
COMMAND_KEYS = frozenset({"command", "cmd", "cmdline", "command_line", "commandline", "argv", "sys_argv"})
MODEL_KEYS = frozenset({"model", "model_name", "model_id", "repo_id", "model_path", "model_name_or_path",
                        "pretrained_model_name_or_path", "hf_model", "model_repo"})
META_DEPTH = 3
# The PyTorch profiler's settings that slow the host down (with_stack records every Python
# call, profile_memory every allocation, record_shapes every operator's input shapes).
OVERHEAD_SETTINGS = ("with_stack", "profile_memory", "record_shapes", "with_modules", "with_flops")
# Fields that say the events were sampled, filtered or truncated, when true (or a rate below 1).
SAMPLED_KEYS = frozenset({"sampled", "sampling", "sample_rate", "sampling_rate", "trace_sampling",
                          "event_sampling", "truncated", "filtered", "events_dropped", "dropped_events"})


def _fields(obj: Any, keys: frozenset[str], depth: int = 0) -> list[tuple[str, Any]]:
    """(key, value) of `keys` in a metadata object, breadth first, META_DEPTH levels deep."""
    if not isinstance(obj, dict) or depth > META_DEPTH:
        return []
    out = [(k, v) for k, v in obj.items() if isinstance(k, str) and k.lower() in keys]
    for v in obj.values():
        if isinstance(v, dict):
            out.extend(_fields(v, keys, depth + 1))
    return out


def _metadata(top: dict[str, Any]) -> list[Any]:
    meta = _literal(top.get("metadata")) if isinstance(top.get("metadata"), str) else top.get("metadata")
    return [top, meta] if isinstance(meta, dict) else [top]


def command_lines(top: dict[str, Any]) -> list[CommandLine]:
    """The command line and the model the trace's metadata names (module constants); [] when
    none does."""
    argv: tuple[str, ...] = ()
    model = None
    for obj in _metadata(top):
        for _, value in _fields(obj, COMMAND_KEYS):
            if not argv and isinstance(value, str) and value.strip():
                argv = (value[:MAX_SETTING_CHARS * 40],)
            elif not argv and isinstance(value, list) and value and all(isinstance(x, str) for x in value):
                argv = tuple(x[:MAX_SETTING_CHARS * 40] for x in value[:200])
        for _, value in _fields(obj, MODEL_KEYS):
            if model is None and isinstance(value, str) and value.strip():
                model = value.strip()[:MAX_SETTING_CHARS * 4]
    if not argv and model is None:
        return []
    return [CommandLine(None, argv, "metadata", model)]


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return 0 < value < 1 if isinstance(value, float) else value != 0
    return isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on")


def profiler_options(top: dict[str, Any]) -> ProfilerOptions:
    settings = {key: _truthy(top[key]) for key in OVERHEAD_SETTINGS if key in top}
    sampled = tuple(sorted({k for obj in _metadata(top) for k, v in _fields(obj, SAMPLED_KEYS)
                            if _truthy(v) or (isinstance(v, float) and 0 < v < 1)}))
    return ProfilerOptions(settings, sampled)


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
