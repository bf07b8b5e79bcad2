"""The Kineto half of the simple reference (see benchmarks/peers_reference.py for the
definitions): PyTorch profiler chrome traces, read with plain json."""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks.peers_reference import device_figures, top_names, union_ns

# Kineto events that occupy a GPU engine, by category.
KINETO_KERNEL_CATS = ("kernel", "Kernel")
KINETO_COPY_CATS = ("gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
# Launch calls HTA's kernel launch statistics join to GPU events (exact names).
HTA_LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")


def load_kineto(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def _ns(value: float) -> int:
    """Kineto microseconds (int or float) to integer nanoseconds."""
    return int(round(value * 1000))


def _hta_rounded_us(ts: float, dur: float) -> int:
    """One event's duration in whole microseconds after HTA's rounding of fractional times:
    start rounded up, end rounded down (can be negative for sub-microsecond events)."""
    return math.floor(ts + dur) - math.ceil(ts)


def kineto_reference(path: Path, top_n: int = 10) -> dict[str, Any]:
    """Per-device figures, kernel totals and HTA-style launch statistics from a Kineto trace."""
    data = load_kineto(path)
    events = [e for e in data.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"]
    gpu: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    host_by_corr: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    step_starts: dict[str, int] = {}
    fractional = False
    for e in events:
        cat = e.get("cat")
        args = e.get("args") or {}
        if isinstance(e.get("ts"), float) and not float(e["ts"]).is_integer():
            fractional = True
        if cat in KINETO_KERNEL_CATS or cat in KINETO_COPY_CATS:
            gpu.append(e)
        elif cat == "cuda_sync":
            syncs.append(e)
        elif "correlation" in args and cat not in ("cuda_sync", "gpu_user_annotation"):
            host_by_corr[args["correlation"]].append(e)
        name = str(e.get("name", ""))
        if name.startswith("ProfilerStep") and cat != "gpu_user_annotation":
            start = _ns(e["ts"])
            step_starts[name] = min(start, step_starts.get(name, start))
    if not any(e.get("cat") in KINETO_KERNEL_CATS for e in gpu):
        return {"format": "kineto", "skipped": "no kernel events in the trace"}

    def figures(selected: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        kern: dict[int, list[tuple[int, int, int, str]]] = defaultdict(list)
        cop: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for e in selected:
            args = e.get("args") or {}
            dev = int(args.get("device", -1))
            s = _ns(e["ts"])
            end = s + _ns(e.get("dur", 0))
            if e.get("cat") in KINETO_KERNEL_CATS:
                kern[dev].append((s, end, int(args.get("stream", -1)), str(e.get("name"))))
            else:
                cop[dev].append((s, end, int(args.get("stream", -1))))
        return {dev: device_figures(k, cop.get(dev, [])) for dev, k in sorted(kern.items())}

    def totals(selected: list[dict[str, Any]]) -> dict[tuple[int, str], list[int]]:
        by_name: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
        for e in selected:
            if e.get("cat") in KINETO_KERNEL_CATS:
                key = (int((e.get("args") or {}).get("device", -1)), str(e.get("name")))
                by_name[key][0] += 1
                by_name[key][1] += _ns(e.get("dur", 0))
        return by_name

    by_name = totals(gpu)
    rounded_us = sum(_hta_rounded_us(e["ts"], e.get("dur", 0)) for e in gpu if e.get("cat") in KINETO_KERNEL_CATS)
    out: dict[str, Any] = {
        "format": "kineto",
        "fractional_timestamps": fractional,
        "gpu_events": len(gpu),
        "devices": figures(gpu),
        "top_kernels": top_names(by_name, top_n),
        "kernel_sum_ns": sum(v[1] for v in by_name.values()),
        "rounded_kernel_sum_ns": rounded_us * 1000,
        "profiler_steps": sorted(step_starts),
        "cuda_sync": sync_figures(gpu, syncs),
        "launch": launch_stats(gpu, host_by_corr),
    }
    if len(step_starts) >= 2:
        last_start = max(step_starts.values())
        kept = [e for e in gpu
                if any(_ns(h["ts"]) < last_start
                       for h in host_by_corr.get((e.get("args") or {}).get("correlation"), []))]
        out["steps"] = {"last_step_start_ns": last_start, "gpu_events": len(kept), "devices": figures(kept),
                        "top_kernels": top_names(totals(kept), top_n)}
    return out


def sync_figures(gpu: list[dict[str, Any]], syncs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """cuda_sync events (host waits recorded on the GPU timeline) per device: how many, and the
    window and union when they are counted as GPU activity together with kernels and copies."""
    out: dict[int, dict[str, Any]] = {}
    per_dev: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in gpu:
        s = _ns(e["ts"])
        per_dev[int((e.get("args") or {}).get("device", -1))].append((s, s + _ns(e.get("dur", 0))))
    sync_dev: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for e in syncs:
        s = _ns(e["ts"])
        sync_dev[int((e.get("args") or {}).get("device", -1))].append((s, s + _ns(e.get("dur", 0))))
    for dev, spans in sorted(sync_dev.items()):
        both = per_dev.get(dev, []) + spans
        start, end = min(s for s, _ in both), max(e for _, e in both)
        out[dev] = {"events": len(spans), "window_ns": end - start, "busy_ns": union_ns(both),
                    "idle_ns": end - start - union_ns(both)}
    return out


def launch_stats(gpu: list[dict[str, Any]], host_by_corr: dict[Any, list[dict[str, Any]]]) -> dict[str, Any]:
    """GPU events joined by correlation id to a launch call named exactly as HTA's list;
    delay = GPU start - (call start + call duration), negative delays counted as 0. Also the
    kernels alone (HTA joins copies and memsets too; our queue time is kernels only)."""
    delays: list[int] = []
    kernel_delays: list[int] = []
    unmatched: dict[str, int] = defaultdict(int)
    for e in gpu:
        calls = host_by_corr.get((e.get("args") or {}).get("correlation"), [])
        call = next((c for c in calls if c.get("name") in HTA_LAUNCH_NAMES), None)
        if call is None:
            launcher = next((str(c.get("name")) for c in calls if c.get("cat") in ("cuda_runtime", "cuda_driver")),
                            "(no launch call)")
            unmatched[launcher] += 1
            continue
        delays.append(max(0, _ns(e["ts"]) - _ns(call["ts"]) - _ns(call.get("dur", 0))))
        if e.get("cat") in KINETO_KERNEL_CATS:
            kernel_delays.append(delays[-1])
    delays.sort()
    kernel_delays.sort()
    return {
        "gpu_events": len(gpu),
        "matched": len(delays),
        "unmatched_by_launcher": dict(sorted(unmatched.items(), key=lambda kv: -kv[1])),
        "delay_median_ns": delays[len(delays) // 2] if delays else None,
        "kernels_matched": len(kernel_delays),
        "kernel_delay_median_ns": kernel_delays[len(kernel_delays) // 2] if kernel_delays else None,
        "delay_sum_ns": sum(delays),
    }
