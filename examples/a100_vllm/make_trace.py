"""Write the synthetic vLLM-decode-style A100 trace this example's report is built from.

SYNTHETIC: no GPU ran. benchmarks/synth.py simulates one vLLM worker on one
NVIDIA A100-SXM4-80GB (Llama-style, 24 layers, eager mode): a prefill step every 32 steps,
decode steps in between, NVTX ranges prefill / decode_step > layer_N > attention / mlp,
cudaLaunchKernel per kernel, an input copy, a sampled-token copy and a blocking
cudaStreamSynchronize every step. Tables and columns follow Nsight Systems 2024.6
(export schema 3.16.1).

    python examples/a100_vllm/make_trace.py --out examples/a100_vllm/trace.sqlite
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.synth import SynthConfig, generate  # noqa: E402

CONFIG = SynthConfig(
    kernels=15_000,
    processes=1,
    layers=24,
    graph=False,
    nvtx_depth=3,
    prefill_every=32,
    seed=7,
    version="2024.6",
    gpu_name="NVIDIA A100-SXM4-80GB",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).with_name("trace.sqlite"),
                    help="where to write the trace (replaced if it exists)")
    args = ap.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    totals = generate(CONFIG, args.out, sidecar=False)
    rows = totals["rows"]
    assert isinstance(rows, dict)
    print(f"wrote {args.out} (synthetic): {rows['CUPTI_ACTIVITY_KIND_KERNEL']:,} kernels, "
          f"{rows['NVTX_EVENTS']:,} NVTX ranges")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
