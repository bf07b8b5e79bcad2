"""What the host was doing while the GPU waited on it, in words: the named sources of the
host-caused idle time (analysis/host_sources.py, reported per device by idle_causes), the
family that holds the most of it, and what capture option would name the rest.

A family leads the advice when it holds at least LEAD_SHARE of the host-caused idle time of
the devices in question; when no record names at least UNNAMED_SHARE of it, one line says
what capture option would.
"""

from __future__ import annotations

from typing import Any

from nsys_llm_explainer.fmt import dur, pct

LEAD_SHARE = 0.3
UNNAMED_SHARE = 0.5
TOP_SOURCES = 3
FAMILY_WORDS = {
    "data_loading": "data loading",
    "optimizer": "the optimizer step",
    "sync": "a read-back or synchronize",
    "allocation": "memory allocation",
    "communication": "communication calls",
    "file_io": "file or network I/O",
    "waiting": "waiting: poll, lock or sleep",
    "serving_host": "serving work on the host: scheduling, sampling, detokenization",
    "logging_checkpoint": "logging or checkpointing",
    "framework": "framework operators: Python and dispatch between launches",
}
KIND_WORDS = {"range": "", "os": " (OS call)", "cuda": " (CUDA call)", "python": " (Python frame)"}
NSYS_HINT = ("Nothing in the trace names the host's work for {pct} of that time: capture CPU samples "
             "(`nsys profile --sample=process-tree`), OS runtime calls (`--trace=osrt`) or NVTX ranges around "
             "the host's phases to see it.")
KINETO_HINT = ("Nothing in the trace names the host's work for {pct} of that time: profile with "
               "`torch.profiler.profile(with_stack=True)` and wrap the host's phases in "
               "`torch.profiler.record_function(...)` to see it.")


def _rows(ic: dict[str, Any] | None, devices: list[int]) -> list[dict[str, Any]]:
    if ic is None:
        return []
    return [d["host_sources"] for d in ic.get("devices", [])
            if d["device_id"] in devices and d.get("host_sources")]


def combined(ic: dict[str, Any] | None, devices: list[int]) -> dict[str, Any] | None:
    """The host sources of `devices` summed: idle_ns, unnamed_ns, sources (by name and kind),
    families, samples; None when nothing was measured."""
    rows = _rows(ic, devices)
    if not rows:
        return None
    idle = sum(r["idle_ns"] for r in rows)
    if idle <= 0:
        return None
    sources: dict[tuple[str, str], dict[str, Any]] = {}
    families: dict[str, int] = {}
    samples: dict[str, int] = {}
    for r in rows:
        for s in r["sources"]:
            key = (s["name"], s["kind"])
            old = sources.setdefault(key, {**s, "ns": 0})
            old["ns"] += s["ns"]
        for f in r["families"]:
            families[f["family"]] = families.get(f["family"], 0) + f["ns"]
        for s in r.get("samples", []):
            samples[s["symbol"]] = samples.get(s["symbol"], 0) + s["count"]
    return {
        "idle_ns": idle,
        "unnamed_ns": sum(r["unnamed_ns"] for r in rows),
        "sources": sorted(sources.values(), key=lambda s: (-s["ns"], s["name"])),
        "families": sorted(families.items(), key=lambda kv: (-kv[1], kv[0])),
        "samples": sorted(samples.items(), key=lambda kv: (-kv[1], kv[0])),
    }


def lead_family(hs: dict[str, Any] | None) -> str | None:
    """The family that holds at least LEAD_SHARE of the host-caused idle time, or None."""
    if hs is None or not hs["families"]:
        return None
    family, ns = hs["families"][0]
    return family if ns >= LEAD_SHARE * hs["idle_ns"] else None


def source_text(s: dict[str, Any], idle_ns: int) -> str:
    """One source with its share, what it is in parentheses after the share, so that a list of
    sources reads one item at a time: "`write` (OS call) 31.8% (file or network I/O)"."""
    share = pct(100.0 * s["ns"] / idle_ns)
    if s["name"].startswith("after "):
        return f"after a blocking `{s['name'][len('after '):]}` drained the GPU {share}"
    notes = [FAMILY_WORDS[s["family"]]] if s.get("family") in FAMILY_WORDS else []
    if s.get("inner"):
        notes.append(f"inside it mostly `{s['inner']}`")
    words = f" ({'; '.join(notes)})" if notes else ""
    return f"`{s['name']}`{KIND_WORDS.get(s['kind'], '')} {share}{words}"


def clause(hs: dict[str, Any] | None) -> str | None:
    """'the launching thread was in `X` for 82.4% of that time (data loading)', naming the
    source that holds the most, or the CPU samples when no range does; None when nothing
    names at least LEAD_SHARE of it."""
    if hs is None:
        return None
    idle = hs["idle_ns"]
    top = hs["sources"][0] if hs["sources"] else None
    if top is not None and top["ns"] >= LEAD_SHARE * idle and top["name"].startswith("after "):
        return (f"for {100.0 * top['ns'] / idle:.1f}% of that time the GPU had drained while the launching thread "
                f"was blocked in `{top['name'][len('after '):]}`, and the host had not queued more work yet")
    if top is not None and top["ns"] >= LEAD_SHARE * idle:
        words = f" ({FAMILY_WORDS[top['family']]})" if top.get("family") in FAMILY_WORDS else ""
        return (f"the launching thread was in `{top['name']}`{KIND_WORDS.get(top['kind'], '')} for "
                f"{100.0 * top['ns'] / idle:.1f}% of that time{words}")
    family = lead_family(hs)
    if family is not None:
        ns = dict(hs["families"])[family]
        return f"the launching thread was in {FAMILY_WORDS[family]} for {100.0 * ns / idle:.1f}% of that time"
    if hs["samples"] and hs["unnamed_ns"] >= UNNAMED_SHARE * idle:
        total = sum(n for _, n in hs["samples"])
        sym, n = hs["samples"][0]
        return (f"no range names the host's work then; CPU samples on the launching thread put "
                f"{100.0 * n / total:.0f}% of it in `{sym}`")
    return None


def evidence(hs: dict[str, Any] | None, kineto: bool) -> list[str]:
    """Evidence lines: the top sources with their shares, the CPU samples, the capture hint."""
    if hs is None:
        return []
    idle = hs["idle_ns"]
    lines = []
    shown = [s for s in hs["sources"][:TOP_SOURCES] if 100.0 * s["ns"] / idle >= 0.05]  # never "0.0%"
    if shown:
        tops = "; ".join(source_text(s, idle) for s in shown)
        unnamed = 100.0 * hs["unnamed_ns"] / idle
        lines.append(f"what the launching thread was in during the {dur(idle)} of host-caused idle time: {tops}"
                     + (f"; nothing recorded for {pct(unnamed)}" if unnamed >= 0.05 else ""))
    if hs["samples"]:
        total = sum(n for _, n in hs["samples"])
        tops = ", ".join(f"`{sym}` {100.0 * n / total:.0f}%" for sym, n in hs["samples"][:TOP_SOURCES])
        lines.append(f"CPU samples on the launching thread in the time no range names ({total:,} samples): {tops}")
    if hs["unnamed_ns"] >= UNNAMED_SHARE * idle and not hs["samples"]:
        unnamed_pct = pct(100.0 * hs["unnamed_ns"] / idle)
        lines.append((KINETO_HINT if kineto else NSYS_HINT).format(pct=unnamed_pct))
    return lines
