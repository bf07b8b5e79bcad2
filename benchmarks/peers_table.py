"""Plain-text side-by-side tables for benchmarks/peers.py.

One table per device: each row is one quantity with its definition, each column one tool;
a cell is empty ("-") where the tool does not report that quantity. Times are milliseconds
with 3 decimals (HTA's microseconds and nsys-ai's milliseconds converted; our tool's and the
reference's nanoseconds divided by 1e6).
"""

from __future__ import annotations

from typing import Any

Row = tuple[str, list[str]]
DASH = "-"


def ms(ns: float | None) -> str:
    return DASH if ns is None else f"{ns / 1e6:,.3f}"


def pct(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}%"


def short(name: str, width: int = 58) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _table(title: str, header: list[str], rows: list[Row]) -> None:
    width = max([len(label) for label, _ in rows] + [len(title)])
    cols = [max([len(h)] + [len(r[1][i]) for r in rows]) for i, h in enumerate(header)]
    print(f"\n   {title:<{width}}  " + "  ".join(f"{h:>{w}}" for h, w in zip(header, cols, strict=True)))
    for label, cells in rows:
        print(f"   {label:<{width}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, cols, strict=True)))


def _ours_device(ours: dict[str, Any], dev: int) -> dict[str, Any]:
    idle = ours.get("gpu_idle") or {}
    return next((d for d in idle.get("devices", []) if d.get("device_id") == dev), {})


def _ours_kernels(ours: dict[str, Any], dev: int) -> dict[str, tuple[int, int]]:
    tk = ours.get("top_kernels") or {}
    return {k["name"]: (k["calls"], k["total_ns"]) for k in tk.get("kernels", []) if k.get("device_id") == dev}


def _timings(res: dict[str, Any]) -> None:
    parts = [f"reference {res['reference_wall_s']:.2f}"]
    for key, label in (("ours", "nsys-llm-explain"), ("hta", "HTA"), ("hta_unrounded", "HTA no-rounding"),
                       ("nsysai", "nsys-ai")):
        r = res.get(key)
        if r is None:
            continue
        inner = ", ".join(f"{k} {v:.2f}" for k, v in (r.get("seconds") or {}).items() if k != "total")
        parts.append(f"{label} {r['wall_s']:.2f}" + (f" ({inner})" if inner else ""))
    runs = len((res.get("ours") or {}).get("walls_s") or [1])
    median = f", median of {runs} runs" if runs > 1 else ""
    print(f"   wall s{median}, whole process (interpreter start, import, parse, analyses): " + " | ".join(parts))
    for key, label in (("ours", "nsys-llm-explain"), ("hta", "HTA"), ("hta_unrounded", "HTA no-rounding"),
                       ("nsysai", "nsys-ai")):
        r = res.get(key) or {}
        if r.get("error"):
            print(f"   {label}: {r['error']}")
        for analysis, err in (r.get("errors") or {}).items():
            print(f"   {label} {analysis} failed: {err}")


def _ours_idle_cells(ours: dict[str, Any], dev: int) -> dict[str, str]:
    d = _ours_device(ours, dev)
    calls, total = 0, 0
    for c, t in _ours_kernels(ours, dev).values():
        calls, total = calls + c, total + t
    if not d:
        return {}
    window = d["window_end_ns"] - d["window_start_ns"]
    return {"kernels": str(calls) if calls else DASH, "sum": ms(total) if calls else DASH, "window": ms(window),
            "busy": ms(d["busy_ns"]), "idle": ms(d["idle_ns"]), "idle_pct": pct(d["idle_pct"]),
            "copies": ms(d["idle_ns"] - d["idle_covered_by_copies_ns"])}


def print_trace(res: dict[str, Any], top: int) -> None:
    ref = res["reference"]
    kind = "PyTorch profiler (Kineto) JSON" if res["format"] == "kineto" else "Nsight Systems SQLite"
    print(f"\n== {res['trace']} ({kind})")
    _timings(res)
    if ref.get("skipped"):
        print(f"   reference: {ref['skipped']}")
        return
    if res["format"] == "kineto":
        from benchmarks.peers_table_kineto import print_kineto

        print_kineto(res, top)
    else:
        print_nsys(res, top)


def print_nsys(res: dict[str, Any], top: int) -> None:
    ref, ours, peer = res["reference"], res.get("ours") or {}, res.get("nsysai") or {}
    for dev_key, r in ref["devices"].items():
        dev = int(dev_key)
        o = _ours_idle_cells(ours, dev)
        p = (peer.get("devices") or {}).get(str(dev), {})
        summ = (p.get("summary") or {}).get("timing", {})
        ov = p.get("overlap") or {}
        gaps = p.get("gpu_idle_gaps") or {}
        busy_ov = None
        if ov and "error" not in ov:
            busy_ov = (ov["compute_only_ms"] + ov["nccl_only_ms"] + ov["overlap_ms"]) * 1e6
        window = r["window_ns"]
        rows: list[Row] = [
            ("kernels", [str(r["kernels"]), o.get("kernels", DASH),
                         str((p.get("summary") or {}).get("kernel_count", DASH))]),
            ("kernel time, sum of durations", [ms(r["kernel_sum_ns"]), o.get("sum", DASH),
                                               f"{summ['compute_ms']:,.3f}" if summ else DASH]),
            ("window, first kernel start..last kernel end", [ms(window), o.get("window", DASH),
                                                             f"{summ['span_ms']:,.3f}" if summ else DASH]),
            ("busy, union of kernel intervals", [ms(r["busy_ns"]), o.get("busy", DASH), ms(busy_ov)]),
            ("idle = window - busy", [ms(r["idle_ns"]), o.get("idle", DASH),
                                      f"{summ['idle_ms']:,.3f}" if summ else DASH]),
            ("idle % of window", [pct(r["idle_pct"]), o.get("idle_pct", DASH),
                                  pct(100 - summ["utilization_pct"]) + " (100-util)" if summ else DASH]),
            ("per-stream gaps > 1 ms, summed over streams", [
                ms(r["stream_gap_over_1ms_ns"]), DASH,
                f"{gaps['total_idle_ms']:,.3f} ({gaps['pct_of_profile']}%)" if gaps else DASH]),
            ("idle not covered by memcpy/memset", [ms(r["idle_with_copies_ns"]) + " *", o.get("copies", DASH),
                                                   DASH]),
        ]
        _table(f"device {dev}, ms", ["reference", "nsys-llm-explain", "nsys-ai"], rows)
        print("   * reference: window widened to the copies too; ours: idle gaps minus the part copies cover")
        _kernel_table_nsys(ref, ours, p, dev, top)
        _causes(ours, dev, p)


def _kernel_table_nsys(ref: dict[str, Any], ours: dict[str, Any], p: dict[str, Any], dev: int, top: int) -> None:
    mine = _ours_kernels(ours, dev)
    rows: list[Row] = []
    for k in [k for k in ref["top_kernels"] if k["device"] == dev][:top]:
        o = mine.get(k["name"])
        rows.append((short(k["name"]), [f"{k['calls']}", ms(k["total_ns"]), ms(o[1]) if o else DASH]))
    _table(f"top kernels on device {dev} by demangled name", ["calls", "reference ms", "nsys-llm-explain ms"], rows)
    peer_top = {k["name"]: k for k in ((p.get("summary") or {}).get("top_kernels") or [])}
    rows = []
    for k in [k for k in ref["top_kernels_short"] if k["device"] == dev][:top]:
        pk = peer_top.get(k["name"])
        rows.append((short(k["name"]), [f"{k['calls']}", ms(k["total_ns"]),
                                        f"{pk['total_ms']:,.3f} ({pk['pct']}%)" if pk else DASH]))
    _table(f"top kernels on device {dev} by short name", ["calls", "reference ms", "nsys-ai summary ms"], rows)


def _causes(ours: dict[str, Any], dev: int, p: dict[str, Any]) -> None:
    ic = ours.get("idle_causes") or {}
    d = next((x for x in ic.get("devices", []) if x.get("device_id") == dev), None)
    if d:
        print(f"\n   nsys-llm-explain idle causes, device {dev}: " + ", ".join(
            f"{c['cause']} {ms(c['idle_ns'])} ms ({c['pct_of_idle']}%)" for c in d["causes"] if c["gaps"]))
    tops = p.get("gpu_idle_gaps_top") or []
    if tops:
        print(f"   nsys-ai classifies only its {len(tops)} largest gaps: " + ", ".join(
            f"{g['gap_ns'] / 1e6:,.1f} ms {(g.get('attribution') or {}).get('category', '?')}" for g in tops))
    findings = p.get("findings")
    if findings is not None:
        ids = sorted({(f.get("id") or f.get("label") or "?").split("_gpu")[0] for f in findings})
        print(f"   nsys-ai findings ({len(findings)}): " + ", ".join(short(i, 40) for i in ids))
