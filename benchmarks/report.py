"""Plain-text tables for benchmark results."""

from __future__ import annotations

from typing import Any

SHORT = {"CUPTI_ACTIVITY_KIND_KERNEL": "kernel", "CUPTI_ACTIVITY_KIND_RUNTIME": "runtime",
         "NVTX_EVENTS": "nvtx", "CUPTI_ACTIVITY_KIND_MEMCPY": "memcpy",
         "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "sync"}
LOADER_TABLE = {"kernels": "CUPTI_ACTIVITY_KIND_KERNEL", "runtime": "CUPTI_ACTIVITY_KIND_RUNTIME",
                "nvtx": "NVTX_EVENTS", "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
                "sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"}


def _rate(rows: float, seconds: float) -> str:
    return f"{rows / seconds / 1e6:6.2f} M rows/s" if seconds > 0 else "       -"


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _mb(mib: float) -> float:
    return mib * 2**20 / 1e6


def print_result(r: dict[str, Any], tree_mb_t: float, ratio_t: float) -> None:
    rows = r["rows"]
    origin = "reused" if r["reused_trace"] else f"generated in {r['generate_s']} s"
    print(f"\n== {r['size']}: {r['trace']} ({r['trace_mib']:.0f} MiB, {origin})")
    print("   rows: " + ", ".join(f"{SHORT.get(t, t)} {n:,}" for t, n in rows.items()))
    adbc = r.get("adbc", {})
    if "seconds" in adbc:
        print(f"\n   ADBC floor (SQLite driver -> Arrow, needed columns): wall {adbc['seconds']:.2f} s, "
              f"cpu {adbc['cpu_s']:.2f} s, {adbc['rows']:,} rows, "
              f"process peak {_mb(adbc['peak_tree_rss_mib']):,.0f} MB")
    else:
        print(f"\n   ADBC floor: unavailable ({adbc.get('unavailable')})")
    print("\n   fetch floor (plain sqlite3, needed columns)      wall      cpu")
    for table, f in r["floor"].items():
        print(f"     {SHORT[table]:<8} {f['rows']:>10,} rows {f['seconds']:8.2f} s "
              f"{f['cpu_s']:6.2f} s {_rate(f['rows'], f['seconds'])}")
    print(f"     {'total':<8} {'':>15} {r['floor_s']:8.2f} s {r['floor_cpu_s']:6.2f} s")
    cli = r["cli"]
    ratio = r["ratio_to_floor"] or 0.0
    cpu_ratio = r["cpu_ratio_to_floor"] or 0.0
    adbc_ratio = r.get("ratio_to_adbc")
    print("\n   whole CLI run (all metrics, all outputs)")
    tree = _mb(cli["peak_tree_rss_mib"])
    print(f"     wall {cli['wall_s']:8.2f} s   cpu {cli['cpu_s']:.2f} s (with helper processes)")
    print(f"     peak memory: process tree {tree:,.0f} MB, main process {_mb(cli['peak_main_rss_mib']):,.0f} MB, "
          f"largest process {_mb(cli['peak_rss_mib']):,.0f} MB")
    adbc_text = f"{adbc_ratio:.2f}x the ADBC floor, " if adbc_ratio is not None else ""
    print(f"     ratio: wall {adbc_text}{ratio:.2f}x the sqlite3 floor (cpu {cpu_ratio:.2f}x)")
    if r["size"] == "large":
        print(f"     targets: <= {ratio_t:g}x the ADBC floor "
              f"{_mark(adbc_ratio is not None and adbc_ratio <= ratio_t)}, "
              f"process tree <= {tree_mb_t:,.0f} MB {_mark(tree <= tree_mb_t)}")
    bd = r.get("breakdown")
    if bd:
        print(f"\n   in-process breakdown, cpu seconds (explain {bd['explain_s']:.2f} s, "
              f"writers {bd['render_s']:.2f} s, {bd['output_bytes'] / 2**20:.1f} MiB of output)")
        for name, s in sorted(bd["load_s"].items(), key=lambda kv: -kv[1]):
            table = LOADER_TABLE.get(name)
            n = rows.get(table, 0) if table else 0
            extra = f"  {_rate(n, s)}" if n else ""
            print(f"     load {name:<22} {s:8.2f} s{extra}")
        for mid, s in sorted(bd["metric_s"].items(), key=lambda kv: -kv[1]):
            status = bd["statuses"].get(mid, "?")
            note = "" if status == "ok" else f"  ({status})"
            print(f"     metric {mid:<20} {s:8.2f} s{note}")
        print(f"     {'rules, trace info, rest':<27} {bd['other_s']:8.2f} s")
    print("\n   correctness (report.json vs generator sidecar): "
          + ("ok" if not r["problems"] else "FAILED: " + "; ".join(r["problems"])))


def print_comparison(medium: dict[str, Any], large: dict[str, Any], target: float) -> None:
    m, g = medium["cli"]["wall_s"], large["cli"]["wall_s"]
    k = large["rows"]["CUPTI_ACTIVITY_KIND_KERNEL"] / medium["rows"]["CUPTI_ACTIVITY_KIND_KERNEL"]
    ratio = g / m if m else float("inf")
    print(f"\n== growth: large/medium wall {g:.2f} s / {m:.2f} s = {ratio:.2f}x for "
          f"{k:.1f}x the kernels (target <= {target:.0f}x) {_mark(ratio <= target)}")
