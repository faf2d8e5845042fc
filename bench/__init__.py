"""Side-by-side benchmarks (docs/benchmarks/README.md): ours and a reference, measured in one run."""
