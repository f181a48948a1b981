"""Benchmarks: `python -m bench.run` (see docs/BENCHMARKS.md). Apart from the
tests: they print figures and assert nothing."""
