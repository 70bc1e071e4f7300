"""Support for the benchmark and GPU scripts under `scripts/` (`harness`: bootstrap, clock, log,
time budget, sections)."""
