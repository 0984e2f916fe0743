"""GPU benchmarks: one module per question, each run as `python -m benchmarks.<name>` from the
repository root; benchmarks.runner records every run (see benchmarks/README.md)."""
