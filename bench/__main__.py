"""`python -m bench [B1 B5 ...] --profile ci|full [--sizes]`: run the named benchmarks (all when none named).

Every benchmark module exposes `run(profile) -> Iterable[Result]`: one run at the profile's size.

`--sizes` asks for cost against size (docs benchmarks.md, "How cost grows"): a module that also
exposes `run_sizes(profile) -> Iterable[Result]` runs itself at its three sizes for that profile
(the full profile's largest step is the plain full run) and sets `Result.size` on every line, e.g.
"nodes=300". A module without `run_sizes` runs once, as without the flag. The sizes live in each
module, next to the workload they scale, so this runner needs no knowledge of nodes or workloads.
`make bench-report` saves this output and draws it (bench/report.py).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterable

from bench.common import Profile, Result, emit, log

# Benchmark id -> module under bench/ exposing `run(profile) -> Iterable[Result]`.
REGISTRY: dict[str, str] = {
    "B1": "bench.b1_sync",
    "B2": "bench.b2_watch",
    "B3": "bench.b3_admission",
    "B4": "bench.b4_submit",
    "B5": "bench.b5_agent",
    "B6": "bench.b6_ingest",
    "B7": "bench.b7_push",
    "B8": "bench.b8_plugin",
    "B9": "bench.b9_api",
}


def _load(bench_id: str, sizes: bool = False) -> Callable[[Profile], Iterable[Result]]:
    """The module's `run`, or its `run_sizes` when sizes are asked for and it has one."""
    module = importlib.import_module(REGISTRY[bench_id])
    name = "run_sizes" if sizes and hasattr(module, "run_sizes") else "run"
    runner: Callable[[Profile], Iterable[Result]] = getattr(module, name)
    return runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("ids", nargs="*", help=f"benchmarks to run, of {sorted(REGISTRY)}")
    parser.add_argument("--profile", choices=["ci", "full"], default="ci")
    parser.add_argument("--sizes", action="store_true", help="run benchmarks that scale at three sizes")
    args = parser.parse_args(argv)
    unknown = [i for i in args.ids if i not in REGISTRY]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {sorted(REGISTRY)}")
    failed = 0
    for bench_id in args.ids or sorted(REGISTRY):
        log(f"== {bench_id} ({args.profile}{', sizes' if args.sizes else ''})")
        for result in _load(bench_id, args.sizes)(args.profile):
            emit(result)
            failed += 0 if result.passed else 1
    log(f"{failed} metric(s) missed their goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
