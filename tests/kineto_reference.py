"""A deliberately simple reference over the raw JSON of a Kineto trace.

json.load with Decimal floats, plain loops, no code shared with the tool: kernel time per
device and the union of kernel intervals (busy time), in integer nanoseconds exactly as the
file writes them.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.reference import union_length

KERNEL_CATEGORIES = ("kernel", "Kernel")


def load(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw.decode("utf-8", "replace"), parse_float=Decimal)


def ns(value: Any) -> int:
    return int(Decimal(value) * 1000)


def kernels(doc: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(device, start ns, end ns) of every kernel event."""
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in KERNEL_CATEGORIES:
            device = e.get("args", {}).get("device", e.get("pid"))
            start = ns(e["ts"])
            out.append((int(device), start, start + ns(e.get("dur", 0))))
    return out


def kernel_ns_per_device(doc: dict[str, Any]) -> dict[int, int]:
    total: dict[int, int] = {}
    for device, start, end in kernels(doc):
        total[device] = total.get(device, 0) + (end - start)
    return total


def busy_ns_per_device(doc: dict[str, Any]) -> dict[int, int]:
    spans: dict[int, list[tuple[int, int]]] = {}
    for device, start, end in kernels(doc):
        spans.setdefault(device, []).append((start, end))
    return {d: union_length(s) for d, s in spans.items()}


def count(doc: dict[str, Any], *categories: str) -> int:
    return sum(1 for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in categories)
