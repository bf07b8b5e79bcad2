"""The table of predicted against measured windows on counterfactual pairs
(tests/fixtures/counterfactual_pairs.py), as docs/metrics/what_if.md shows it.

Each pair is one program simulated twice, as captured and with the fix made, written in both
trace formats. The what-if row of the fix's change on the first capture predicts a window;
the second capture measures one. tests/graph/test_counterfactual_pairs.py checks the same
pairs against the tolerance.

    python benchmarks/counterfactual_pairs.py [--seed N] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nsys_llm_explainer.metrics import Context, critical_path, steps, what_if  # noqa: E402
from nsys_llm_explainer.model import MetricResult  # noqa: E402
from nsys_llm_explainer.options import Options  # noqa: E402
from nsys_llm_explainer.trace import formats  # noqa: E402
from tests.fixtures import counterfactual_pairs as cp  # noqa: E402
from tests.fixtures.counterfactual import STEP_RANGE  # noqa: E402

CASES = [("gpu_bound", 64), ("gpu_bound", 1024), ("gpu_bound", 4096), ("host_bound", None), ("copy_bound", None),
         ("sync_bound", None), ("slow_rank", None)]


def window_rows(path: Path, change: str, fmt: str) -> dict:
    data = formats.open_trace(path, jobs=1)
    try:
        given = (change,) if change.startswith("kernel:") else ()
        ctx = Context(data.schema, data, Options(step_range=STEP_RANGE if fmt == "nsys" else None, what_if=given))
        for metric in (steps.METRIC, critical_path.METRIC, what_if.METRIC):
            ctx.results[metric.id] = metric.run(ctx)
        wi = ctx.results["what_if"]
        assert isinstance(wi, MetricResult)
        return {r["change"]: r for r in wi.data["rows"]}
    finally:
        data.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="pairs-"))
    out.mkdir(parents=True, exist_ok=True)
    print("| Pair | Queue depth | Change | Format | Captured | Fixed (measured) | Predicted | Error | "
          "Change on the fixed capture |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    for name, depth in CASES:
        p = cp.pair(name, seed=a.seed, depth=depth)
        for fmt in ("nsys", "kineto"):
            captured, fixed = cp.write(p, out, fmt)
            r1 = window_rows(captured, p.change, fmt)[p.change]
            r2 = window_rows(fixed, p.change, fmt)[p.change]
            measured, predicted = r2["measured_window_ns"], r1["predicted_window_ns"]
            null = r2["predicted_window_ns"]
            error, null_error = 100 * (predicted - measured) / measured, 100 * (null - measured) / measured
            print(f"| {name} | {p.depth:,} | `{p.change}` | {fmt} | {r1['measured_window_ns'] / 1e6:,.2f} ms | "
                  f"{measured / 1e6:,.2f} ms | {predicted / 1e6:,.2f} ms | {error:+.1f}% | {null_error:+.1f}% |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
