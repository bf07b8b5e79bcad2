"""Run Holistic Trace Analysis on one Kineto trace and print its figures as one JSON object.

Executed by benchmarks/peers.py with the interpreter of a separate virtual environment
that has HTA installed (``pip install holistictraceanalysis 'pandas<3'``); it is never
imported by nsys-llm-explain or its tests. Usage:

    /path/to/hta-venv/bin/python benchmarks/peers_hta_driver.py TRACE.json[.gz]

HTA reports times in the trace's own unit (microseconds for Kineto traces); this driver
passes them through unchanged and says so in ``time_unit``. Every analysis runs on its own,
so one that raises leaves the others standing; its error is recorded with the file and
line it was raised at (HTA's assertions carry no message). stdout holds only the JSON
object: HTA's log lines go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

from peers_driver_common import dist_version, timed

RUNTIME_CUTOFF_US = 50  # HTA's defaults for the launch statistics outlier counts
LAUNCH_DELAY_CUTOFF_US = 100


def _records(df: Any) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records"))


def analyse(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {"tool": "hta", "trace": path, "time_unit": "us", "seconds": {}, "errors": {},
                           "ns_rounding_disabled": os.environ.get("HTA_DISABLE_NS_ROUNDING") == "1"}
    t0 = time.perf_counter()
    from hta.trace_analysis import TraceAnalysis  # noqa: PLC0415 - timed on purpose

    out["version"] = dist_version("HolisticTraceAnalysis")
    out["seconds"]["import"] = round(time.perf_counter() - t0, 4)

    ta = timed(out, "load", lambda: TraceAnalysis(trace_files={0: os.path.abspath(path)},
                                                      trace_dir=os.path.dirname(os.path.abspath(path))))
    if ta is None:
        return out
    out["profiler_steps"] = [int(s) for s in ta.get_profiler_steps()]
    df = ta.t.get_trace(0)
    gpu = df[df["stream"].ne(-1)]
    out["gpu_rows_after_load"] = int(len(gpu))
    if len(gpu):
        out["gpu_window_after_load"] = [float(gpu["ts"].min()), float((gpu["ts"] + gpu["dur"]).max())]
        out["gpu_negative_durations"] = int((gpu["dur"] < 0).sum())
        out["gpu_zero_durations"] = int((gpu["dur"] == 0).sum())

    temporal = timed(out, "temporal_breakdown", lambda: ta.get_temporal_breakdown(visualize=False))
    if temporal is not None:
        out["temporal_breakdown"] = _records(temporal)

    kernels = timed(out, "kernel_breakdown", lambda: ta.get_gpu_kernel_breakdown(visualize=False))
    if kernels is not None:
        out["kernel_type"] = _records(kernels[0])
        out["kernels"] = _records(kernels[1])

    idle = timed(out, "idle_time_breakdown", lambda: ta.get_idle_time_breakdown(visualize=False))
    if idle is not None:
        out["idle_time_breakdown"] = _records(idle[0])

    launch = timed(out, "kernel_launch_stats", lambda: ta.get_cuda_kernel_launch_stats(visualize=False))
    if launch is not None:
        stats = {}
        for rank, ldf in launch.items():
            stats[str(rank)] = {
                "rows": int(len(ldf)),
                "cpu_duration_sum": float(ldf["cpu_duration"].sum()),
                "gpu_duration_sum": float(ldf["gpu_duration"].sum()),
                "launch_delay_sum": float(ldf["launch_delay"].sum()),
                "launch_delay_median": float(ldf["launch_delay"].median()) if len(ldf) else None,
                "short_gpu_events": int(((ldf["cpu_duration"] <= RUNTIME_CUTOFF_US)
                                         & (ldf["gpu_duration"] < ldf["cpu_duration"])).sum()),
                "runtime_outliers": int((ldf["cpu_duration"] > RUNTIME_CUTOFF_US).sum()),
                "launch_delay_outliers": int((ldf["launch_delay"] > LAUNCH_DELAY_CUTOFF_US).sum()),
            }
        out["kernel_launch_stats"] = stats
    out["seconds"]["total"] = round(time.perf_counter() - t0, 4)
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    import warnings

    warnings.simplefilter("ignore")
    # HTA prints progress with print() and logging; keep stdout for the one JSON object.
    with contextlib.redirect_stdout(sys.stderr):
        result = analyse(sys.argv[1])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
