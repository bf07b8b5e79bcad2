"""What each concurrency or tuning mechanism of the command line buys, measured A/B.

    python benchmarks/mechanisms.py run --off helper -- TRACE --out DIR --quiet
    python benchmarks/mechanisms.py ab --off helper --pairs 5 TRACE [TRACE ...]
    python benchmarks/mechanisms.py ab --python-b OTHER_VENV/bin/python TRACE ...

`run` is the command line itself (`nsys-llm-explainer ...`) with one or more mechanisms
switched off (or none: `--off none`), so that two runs differ in that mechanism alone. `ab`
runs the whole command line with the mechanism on (A) and off (B) in turn, A B A B ...,
on each trace, and prints the median wall time and process-tree peak of each side and the
median of the per-pair ratios A/B (below 1: the mechanism makes the run faster). Pairs keep
the ratio meaningful while the machine's speed drifts. With --python-b, B is the same
command line run by another interpreter (a virtualenv with other versions of the
dependencies, e.g. typer 0.28, which brings pydantic) instead of a mechanism switched off.
docs/performance.md records the figures and which mechanisms were kept.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _no_helper() -> None:
    from nsys_llm_explainer.trace.nsys import helper

    helper.start_helpers = lambda *_a, **_k: []  # type: ignore[assignment]


def _no_adbc() -> None:
    import os

    from nsys_llm_explainer.trace.nsys import fetch

    os.environ[fetch.OFF_VAR] = "1"  # the read helper process inherits it


def _no_prefetch() -> None:
    import os

    from nsys_llm_explainer.trace.kineto import prefetch

    os.environ[prefetch.OFF_VAR] = "1"


def _no_threads() -> None:
    from nsys_llm_explainer.runtime import runner

    original = runner.plan
    runner.plan = lambda rows, jobs: original(rows, 1)  # type: ignore[assignment]


def _no_mallopt() -> None:
    from nsys_llm_explainer.runtime import machine

    machine.tune_allocator = lambda: False  # type: ignore[assignment]


def _no_trim() -> None:
    from nsys_llm_explainer.runtime import machine

    machine.release_free_memory = lambda: None  # type: ignore[assignment]


def _no_fast_exit() -> None:
    from nsys_llm_explainer import cli

    cli._exit_now = lambda code: sys.exit(code)  # type: ignore[assignment]


# Each mechanism that may exist, and how to switch it off. A mechanism already removed from
# the code has no switch and cannot be named.
SWITCHES: dict[str, Callable[[], None]] = {
    "helper": _no_helper,
    "adbc": _no_adbc,
    "prefetch": _no_prefetch,
    "threads": _no_threads,
    "mallopt": _no_mallopt,
    "trim": _no_trim,
    "fast-exit": _no_fast_exit,
}


def available() -> dict[str, Callable[[], None]]:
    """The switches whose mechanism is still in the code."""
    import importlib

    where = {"helper": ("nsys_llm_explainer.trace.nsys.helper", "start_helpers"),
             "adbc": ("nsys_llm_explainer.trace.nsys.fetch", "OFF_VAR"),
             "prefetch": ("nsys_llm_explainer.trace.kineto.prefetch", "OFF_VAR"),
             "threads": ("nsys_llm_explainer.runtime.runner", "plan"),
             "mallopt": ("nsys_llm_explainer.runtime.machine", "tune_allocator"),
             "trim": ("nsys_llm_explainer.runtime.machine", "release_free_memory"),
             "fast-exit": ("nsys_llm_explainer.cli", "_exit_now")}
    out = {}
    for name, (module, attr) in where.items():
        try:
            if hasattr(importlib.import_module(module), attr):
                out[name] = SWITCHES[name]
        except ImportError:
            continue
    return out


def run(off: list[str], argv: list[str]) -> None:
    """The command line with the mechanisms in `off` switched off. Nothing is imported
    before the command line starts when none is (`--off none`): the PyTorch profiler
    prefetch overlaps the command line's own imports, which an import here would hide."""
    names = [name for name in off if name != "none"]
    switches = available() if names else {}
    for name in names:
        switches[name]()
    sys.argv = ["nsys-llm-explain", *argv]
    from nsys_llm_explainer import cli

    cli.main()


def ab(off: str, traces: list[Path], pairs: int, python_b: str | None = None) -> list[dict[str, Any]]:
    from benchmarks import measure

    results = []
    work = Path(tempfile.mkdtemp(prefix="nle-mech-"))
    try:
        for trace in traces:
            sides: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
            for _ in range(pairs):
                for side in ("on", "off"):
                    out = work / f"{trace.stem}-{side}"
                    shutil.rmtree(out, ignore_errors=True)
                    python = python_b if side == "off" and python_b else sys.executable
                    cmd = [python, str(Path(__file__).resolve()), "run", "--off",
                           off if side == "off" else "none", "--", str(trace), "--out", str(out), "--quiet"]
                    res = measure.run_cmd(cmd, out)
                    if res["exit_code"] != 0:
                        raise SystemExit(f"{trace}: exit {res['exit_code']}: {res['log']}")
                    sides[side].append(res)
            ratios = [a["wall_s"] / b["wall_s"] for a, b in zip(sides["on"], sides["off"], strict=True)]
            cpu_ratios = [a["cpu_s"] / b["cpu_s"] for a, b in zip(sides["on"], sides["off"], strict=True)]
            results.append({
                "trace": trace.name, "mechanism": off, "pairs": pairs,
                "on_wall_s": statistics.median(r["wall_s"] for r in sides["on"]),
                "off_wall_s": statistics.median(r["wall_s"] for r in sides["off"]),
                "ratio_on_off": statistics.median(ratios),
                "on_cpu_s": statistics.median(r["cpu_s"] for r in sides["on"]),
                "off_cpu_s": statistics.median(r["cpu_s"] for r in sides["off"]),
                "cpu_ratio_on_off": statistics.median(cpu_ratios),
                "on_tree_mib": statistics.median(r["peak_tree_rss_mib"] for r in sides["on"]),
                "off_tree_mib": statistics.median(r["peak_tree_rss_mib"] for r in sides["off"]),
            })
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["run"]:
        ap = argparse.ArgumentParser(prog="mechanisms.py run")
        ap.add_argument("--off", action="append", default=[])
        ap.add_argument("rest", nargs=argparse.REMAINDER)
        a = ap.parse_args(args[1:])
        rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
        run(a.off, rest)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("ab",))
    ap.add_argument("--off", default="none", choices=("none", *SWITCHES))
    ap.add_argument("--python-b", help="B: this interpreter, every mechanism on")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("traces", nargs="+", type=Path)
    a = ap.parse_args(args)
    if (a.off == "none") == (a.python_b is None):
        ap.error("give one of --off MECHANISM or --python-b PYTHON")
    print(f"{'trace':<34} {'A':>8} {'B':>8} {'A/B':>7} {'cpu A':>8} {'cpu B':>8} {'A/B':>7} "
          f"{'tree A':>9} {'tree B':>9}")
    for r in ab(a.off, a.traces, a.pairs, a.python_b):
        print(f"{r['trace']:<34} {r['on_wall_s']:7.2f}s {r['off_wall_s']:7.2f}s {r['ratio_on_off']:7.3f} "
              f"{r['on_cpu_s']:7.2f}s {r['off_cpu_s']:7.2f}s {r['cpu_ratio_on_off']:7.3f} "
              f"{r['on_tree_mib'] * 2**20 / 1e6:7.0f}MB {r['off_tree_mib'] * 2**20 / 1e6:7.0f}MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
