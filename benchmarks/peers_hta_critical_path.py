"""Run Holistic Trace Analysis' critical path analysis on one Kineto trace; print JSON.

Executed with the interpreter of a separate virtual environment that has HTA installed
(``pip install holistictraceanalysis 'pandas<3'``); never imported by nsys-llm-explain or
its tests. Usage:

    /path/to/hta-venv/bin/python benchmarks/peers_hta_critical_path.py TRACE.json[.gz] [ANNOTATION INSTANCE]

Without ANNOTATION the whole trace is analysed (HTA's annotation ""); with one, instance
INSTANCE of it (for example ProfilerStep 1). Output: the path's total length, its split by
HTA's `bound_by` classes, by edge type, and its longest edges with their event names, all
in the trace's unit (microseconds). stdout holds only the JSON object.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

from peers_driver_common import dist_version, timed

TOP = 15


def analyse(path: str, annotation: str, instance: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"tool": "hta-critical-path", "trace": path, "time_unit": "us", "seconds": {},
                           "errors": {}, "annotation": annotation, "instance": instance}
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis  # noqa: PLC0415

    out["version"] = dist_version("HolisticTraceAnalysis")
    ta = timed(out, "load", lambda: TraceAnalysis(trace_files={0: os.path.abspath(path)},
                                                      trace_dir=os.path.dirname(os.path.abspath(path))))
    if ta is None:
        return out
    result = timed(out, "critical_path", lambda: ta.critical_path_analysis(
        rank=0, annotation=annotation, instance_id=instance))
    if result is None:
        return out
    graph, ok = result
    out["success"] = bool(ok)
    edf = timed(out, "breakdown", graph.get_critical_path_breakdown)
    if edf is None or len(edf) == 0:
        return out
    total = float(edf["duration"].sum())
    out["path_us"] = total
    out["bound_by"] = {str(k): float(v) for k, v in edf.groupby("bound_by")["duration"].sum().items()}
    out["edge_type"] = {str(k): float(v) for k, v in edf.groupby("type")["duration"].sum().items()}
    cats = edf.groupby(edf["cat"].astype(str))["duration"].sum()
    out["event_cat"] = {str(k): float(v) for k, v in cats.items()}
    names = edf.groupby(["bound_by", "s_name"])["duration"].sum().sort_values(ascending=False).head(TOP)
    out["top"] = [{"bound_by": str(b), "name": str(n), "us": float(v)} for (b, n), v in names.items()]
    nodes = [graph.node_list[n] for n in graph.critical_path_nodes]
    out["path_window_us"] = [float(min(n.ts for n in nodes)), float(max(n.ts for n in nodes))] if nodes else None
    out["seconds"]["total"] = round(time.perf_counter() - t0, 4)
    return out


def main() -> int:
    if len(sys.argv) not in (2, 4):
        print(__doc__, file=sys.stderr)
        return 2
    import warnings

    warnings.simplefilter("ignore")
    annotation = sys.argv[2] if len(sys.argv) == 4 else ""
    instance = int(sys.argv[3]) if len(sys.argv) == 4 else None
    with contextlib.redirect_stdout(sys.stderr):
        result = analyse(sys.argv[1], annotation, instance)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
