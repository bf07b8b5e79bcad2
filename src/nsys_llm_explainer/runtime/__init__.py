"""How one report run uses the machine: metric threads and when cached tables are released,
CPU count, allocator tuning."""
