"""Nsight Compute results read from their CSV exports: a source, like trace/.

    csvfile.py   which files the arguments name (CSV files, folders, a .ncu-rep's command);
                 one file's tables: preamble, line endings, layouts (details, raw, section);
                 numbers (thousands separators, n/a) and units (usecond, Mbyte, Gbyte/s)
    ncu/counters.py  records joined into launches across files (details + section exports)
    counters.py  each launch's figures from the counters present, with their sources
    classify.py  compute-, memory-, latency-bound or balanced; the limiter; roofline point
    results.py   load() and assess(), and the ncu.json document

    from nsys_llm_explainer.ncu import load, assess
    results = assess(load(["ncu_results/"]))
"""

from __future__ import annotations

from nsys_llm_explainer.ncu.results import Loaded, Measured, Results, assess, document, load

__all__ = ["Loaded", "Measured", "Results", "assess", "document", "load"]
