"""The Nsight Systems SQLite source: read-only opening, schema probe, columnar loading."""
