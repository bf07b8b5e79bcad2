"""Nsight Compute results read from their CSV exports: a source, like trace/.

    csvfile.py   which files the arguments name (CSV files, folders, a .ncu-rep's command);
                 one file's tables: preamble, line endings, layouts (details, raw, section);
                 numbers (thousands separators, n/a) and units (usecond, Mbyte, Gbyte/s)
    ncu/counters.py  records joined into launches across files (details + section exports)
    counters.py  each launch's figures from the counters present, with their sources
    classify.py  compute-, memory-, latency-bound or balanced; the limiter; roofline point
    results.py   load() and assess(), and the ncu.json document

    from nsys_llm_explainer.ncu.results import load, assess
    results = assess(load(["ncu_results/"]))

The package itself holds only the launches table's columns, which a report's metric names
when it is registered: a report without --ncu imports none of the reading code.
"""

from __future__ import annotations

# ncu.csv and a report's tables/ncu_launches.csv: one row per launch (results.launch_rows)
LAUNCH_COLUMNS = (
    "index", "id", "pid", "kernel", "device", "cc", "grid", "block", "duration_ns", "sm_pct", "memory_pct",
    "dram_pct", "l2_pct", "l1_pct", "dram_bytes", "dram_gbps", "achieved_occupancy_pct",
    "theoretical_occupancy_pct", "occupancy_limit", "registers_per_thread", "block_size", "grid_size",
    "shared_mem_per_block", "waves_per_sm", "flops_fp64", "flops_fp32", "flops_fp16", "tensor_ops",
    "tensor_instructions", "class", "pct_of_roof", "limiter", "roofline_precision", "flop_per_byte",
    "achieved_tflops", "roof_tflops", "roofline_pct_of_roof", "tensor_pipe_pct", "l2_hit_pct", "dram_only",
    "matched_kernel", "matched_by", "files",
)
