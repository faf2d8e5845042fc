"""Side-by-side benchmarks (shared/design/benchmarks.md): each one measures ours and a reference in one run."""
