"""`python -m bench [B1 B5 ...] --profile ci|full`: run the named benchmarks (all when none is named)."""

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
    "B5": "bench.b5_agent",
    "B6": "bench.b6_ingest",
    "B7": "bench.b7_push",
    "B8": "bench.b8_plugin",
    "B9": "bench.b9_api",
}


def _load(bench_id: str) -> Callable[[Profile], Iterable[Result]]:
    module = importlib.import_module(REGISTRY[bench_id])
    runner: Callable[[Profile], Iterable[Result]] = module.run
    return runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("ids", nargs="*", help=f"benchmarks to run, of {sorted(REGISTRY)}")
    parser.add_argument("--profile", choices=["ci", "full"], default="ci")
    args = parser.parse_args(argv)
    unknown = [i for i in args.ids if i not in REGISTRY]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {sorted(REGISTRY)}")
    failed = 0
    for bench_id in args.ids or sorted(REGISTRY):
        log(f"== {bench_id} ({args.profile})")
        for result in _load(bench_id)(args.profile):
            emit(result)
            failed += 0 if result.passed else 1
    log(f"{failed} metric(s) missed their goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
