"""The per-step dependency graph: host chains, launches, stream order and waits; replay,
critical path and what-if changes."""
