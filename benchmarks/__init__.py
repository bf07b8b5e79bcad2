"""Benchmark tooling: a synthetic vLLM-like trace generator (synth) and a runner (run)."""
