"""Side-by-side benchmarks (shared/design/benchmarks.md): ours and a reference, measured in one run."""
