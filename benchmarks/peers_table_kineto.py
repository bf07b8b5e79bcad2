"""Side-by-side tables of benchmarks/peers.py for PyTorch profiler (Kineto) traces."""

from __future__ import annotations

from typing import Any

from benchmarks.peers_table import DASH, Row, _causes, _ours_idle_cells, _ours_kernels, _table, ms, pct, short

US = 1000  # HTA reports Kineto times in microseconds


def _us(value: float | None) -> str:
    return DASH if value is None else ms(value * US)


def _hta_cells(h: dict[str, Any]) -> dict[str, str]:
    """HTA's figures for rank 0 (the driver loads one trace as rank 0)."""
    if not h or h.get("error"):
        return {}
    cells: dict[str, str] = {}
    if h.get("gpu_rows_after_load") is not None:
        cells["events"] = f"{h['gpu_rows_after_load']} †"
    tb = (h.get("temporal_breakdown") or [None])[0]
    if tb:
        cells.update({"compute": _us(tb["compute_time(us)"]), "window_c": _us(tb["kernel_time(us)"]) + " †",
                      "idle_c": _us(tb["idle_time(us)"]) + " †", "idle_pct_c": pct(tb["idle_time_pctg"]) + " †"})
    elif "temporal_breakdown" in (h.get("errors") or {}):
        cells.update({k: "crashed" for k in ("compute", "window_c", "idle_c", "idle_pct_c")})
    kernels = h.get("kernels")
    if kernels is not None:
        cells["sum"] = _us(sum(k["sum (us)"] for k in kernels if k["kernel_type"] != "MEMORY"))
    idle = h.get("idle_time_breakdown")
    if idle is not None:
        cells["stream_gaps"] = _us(sum(r["idle_time"] for r in idle))
    return cells


def _ref_cells(d: dict[str, Any] | None) -> dict[str, str]:
    if not d:
        return {}
    window_c = d["window_with_copies_ns"]
    return {"events": str(d["kernels"] + d["copies"]), "kernels": str(d["kernels"]), "sum": ms(d["kernel_sum_ns"]),
            "window": ms(d["window_ns"]), "busy": ms(d["busy_ns"]), "idle": ms(d["idle_ns"]),
            "idle_pct": pct(d["idle_pct"]), "compute": ms(d["compute_busy_ns"]), "window_c": ms(window_c),
            "idle_c": ms(d["idle_with_copies_ns"]),
            "idle_pct_c": pct(100.0 * d["idle_with_copies_ns"] / window_c if window_c else 0.0),
            "stream_gaps": ms(d["stream_gap_with_copies_ns"])}


ROWS = (
    ("events", "GPU events in scope (kernels + memcpy/memset)"),
    ("kernels", "kernels"),
    ("sum", "kernel time, sum of durations"),
    ("window", "window, first kernel start..last kernel end"),
    ("busy", "busy, union of kernel intervals"),
    ("idle", "idle = window - busy"),
    ("idle_pct", "idle % of window"),
    ("compute", "busy, union of computation kernels only"),
    ("window_c", "window with memcpy/memset"),
    ("idle_c", "idle with memcpy/memset counted busy"),
    ("idle_pct_c", "idle % with memcpy/memset"),
    ("stream_gaps", "per-stream gaps incl. copies, summed"),
)


def print_kineto(res: dict[str, Any], top: int) -> None:
    ref, ours = res["reference"], res.get("ours") or {}
    steps = ref.get("steps")
    hta_runs = [(k, lbl) for k, lbl in (("hta", "HTA"), ("hta_unrounded", "HTA no-rounding")) if k in res]
    header = ["reference"] + (["ref., HTA steps"] if steps else []) + ["nsys-llm-explain"]
    header += [lbl for _, lbl in hta_runs]
    for dev_key, r in ref["devices"].items():
        dev = int(dev_key)
        columns = [_ref_cells(r)] + ([_ref_cells(steps["devices"].get(dev_key))] if steps else [])
        columns += [_ours_idle_cells(ours, dev)] + [_hta_cells(res[k]) for k, _ in hta_runs]
        rows: list[Row] = [(label, [c.get(key, DASH) for c in columns]) for key, label in ROWS]
        _table(f"device {dev}, ms", header, rows)
        print("   † HTA counts every event with a stream (cuda_sync events too) as GPU activity")
        sync = (ref.get("cuda_sync") or {}).get(dev_key)
        if sync:
            print(f"   reference with {sync['events']} cuda_sync events counted busy too (HTA's definition, whole "
                  f"trace): window {ms(sync['window_ns'])}, idle {ms(sync['idle_ns'])} ms")
        _kernel_table(ref, ours, res, hta_runs, dev, top)
        _causes(ours, dev, {})
    for key, label in hta_runs:
        _hta_extras(res[key], label)
    launch = ref["launch"]
    print(f"   reference launch join (HTA's call names, whole trace): {launch['matched']} of {launch['gpu_events']} "
          f"GPU events matched, median delay {ms(launch['delay_median_ns'])} ms; unmatched by launcher: "
          + (", ".join(f"{k} {v}" for k, v in launch["unmatched_by_launcher"].items()) or "none"))
    _launch_line(ours, launch)
    if ref.get("fractional_timestamps"):
        print(f"   reference kernel sum {ms(ref['kernel_sum_ns'])} ms; after HTA's rounding to whole microseconds "
              f"{ms(ref['rounded_kernel_sum_ns'])} ms")


def _launch_line(ours: dict[str, Any], launch: dict[str, Any]) -> None:
    """Launch delay (GPU start - call end, >= 0) medians side by side: ours is kernels only
    (every launch API, joined on (process, correlation id)); HTA's also joins copies."""
    lo = ours.get("launch_overhead") or {}
    g = lo.get("global") or {}
    mine = (f"{ms(g['queue_p50_ns'])} ms over {lo.get('kernels_with_launch')} kernels"
            if g.get("queue_p50_ns") is not None else DASH)
    ref_k = (f"{ms(launch['kernel_delay_median_ns'])} ms over {launch['kernels_matched']}"
             if launch.get("kernel_delay_median_ns") is not None else DASH)
    print(f"   median launch delay: nsys-llm-explain queue time {mine}; reference kernels only (HTA's call names) "
          f"{ref_k}; reference kernels + copies {ms(launch['delay_median_ns'])} ms over {launch['matched']}")


def _kernel_table(ref: dict[str, Any], ours: dict[str, Any], res: dict[str, Any],
                  hta_runs: list[tuple[str, str]], dev: int, top: int) -> None:
    steps = ref.get("steps")
    source = steps["top_kernels"] if steps else ref["top_kernels"]
    whole = {k["name"]: k for k in ref["top_kernels"] if k["device"] == dev}
    mine = _ours_kernels(ours, dev)
    hta_names = [{k["name"]: k for k in (res[key].get("kernels") or [])} for key, _ in hta_runs]
    rows: list[Row] = []
    for k in [k for k in source if k["device"] == dev][:top]:
        w = whole.get(k["name"])
        cells = [f"{k['calls']}", ms(k["total_ns"])] + ([ms(w["total_ns"]) if w else DASH] if steps else [])
        cells.append(ms(mine[k["name"]][1]) if k["name"] in mine else DASH)
        for names in hta_names:
            h = names.get(k["name"])
            cells.append(_us(h["sum (us)"]) if h else ("in 'others'" if "others" in names else DASH))
        rows.append((short(k["name"]), cells))
    header = ["calls", "ref. (HTA steps) ms" if steps else "reference ms"] + (["ref. whole trace"] if steps else [])
    header += ["nsys-llm-explain"] + [lbl for _, lbl in hta_runs]
    _table(f"top kernels on device {dev}", header, rows)


def _hta_extras(h: dict[str, Any], label: str) -> None:
    if not h or h.get("error"):
        return
    idle = h.get("idle_time_breakdown")
    if idle is not None:
        cats: dict[str, float] = {}
        for r in idle:
            cats[r["idle_category"]] = cats.get(r["idle_category"], 0.0) + r["idle_time"]
        streams = len({r["stream"] for r in idle})
        print(f"\n   {label} idle time breakdown, summed over {streams} streams: "
              + ", ".join(f"{c} {_us(v)} ms" for c, v in cats.items()))
    kt = h.get("kernel_type")
    if kt is not None:
        print(f"   {label} kernel type breakdown (union, exclusive): "
              + ", ".join(f"{r['kernel_type']} {_us(r['sum'])} ms ({r['percentage']}%)" for r in kt))
    for rank, s in (h.get("kernel_launch_stats") or {}).items():
        print(f"   {label} kernel launch stats rank {rank}: {s['rows']} launches joined, median delay "
              f"{_us(s['launch_delay_median'])} ms, {s['launch_delay_outliers']} with delay > 100 us, "
              f"{s['runtime_outliers']} launch calls > 50 us, {s['short_gpu_events']} GPU events shorter than "
              "their launch call")
    if h.get("gpu_negative_durations"):
        print(f"   {label}: {h['gpu_negative_durations']} GPU events with negative and {h['gpu_zero_durations']} "
              "with zero duration after loading")
