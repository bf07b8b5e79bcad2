"""Profile one whole command-line report with cProfile and print its top entries.

    python benchmarks/profile_report.py TRACE [--top 25] [--out FILE]

The report runs in this process with --jobs 1 (every step in one process and one thread,
where the profiler sees it), all formats. Printed: the entries with the most time spent in
the function itself (tottime), then those with the most time including callees
(cumtime). cProfile's own overhead inflates Python-level work a little against numpy and
SQLite calls; the order is what counts. benchmarks/profiles/ keeps published results.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path


def profile(trace: Path, top: int) -> str:
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    from nsys_llm_explainer import cli

    out = Path(tempfile.mkdtemp(prefix="nle-profile-"))
    prof = cProfile.Profile()
    try:
        t0 = time.perf_counter()
        prof.enable()
        code = cli.run([str(trace), "--out", str(out / "report"), "--quiet", "--jobs", "1"])
        prof.disable()
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if code != 0:
        raise SystemExit(f"the report exited {code}")
    text = io.StringIO()
    text.write(f"trace: {trace.name}, {trace.stat().st_size / 2**20:.0f} MiB; whole report under cProfile "
               f"(--jobs 1): {wall:.1f} s\n")
    for key, title in (("tottime", "own time"), ("cumulative", "time with callees")):
        text.write(f"\n== top {top} by {title} ({key})\n")
        stats = pstats.Stats(prof, stream=text)
        stats.strip_dirs().sort_stats(key).print_stats(top)
    return text.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", type=Path)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, help="also write the result to this file")
    a = ap.parse_args(argv)
    text = profile(a.trace, a.top)
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
