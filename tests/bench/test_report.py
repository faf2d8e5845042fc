"""bench/report.py on synthetic saved runs: the README's rows, and a chart only for a benchmark with
several sizes (no cluster, no database: the lines are written as `python -m bench` would print them)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.common import Result
from bench.report import write_report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
META = {"meta": {"date": "2026-12-04 10:00 UTC", "machine": "test box, 2 cores", "commit": "abc1234"}}


def _lines() -> list[str]:
    sized = [
        # Out of order and "15000" < "4950" as text: the report must sort sizes by number.
        Result("B3", "full", "sim", "makespan_s", 66.2, 66.0, "<= 1.05x ideal", True, "workloads=15000"),
        Result("B3", "full", "sim", "makespan_s", 7.0, 7.0, "<= 1.05x ideal", True, "workloads=1500"),
        Result("B3", "full", "sim", "makespan_s", 22.0, 20.0, "<= 1.05x ideal", False, "workloads=4950"),
        Result("B3", "full", "sim", "admissions_per_s", 5000.0, 2000.0, ">= 2,000", True, "workloads=1500"),
        Result("B3", "full", "sim", "admissions_per_s", 4000.0, 2000.0, ">= 2,000", True, "workloads=4950"),
        Result("B3", "full", "sim", "admissions_per_s", 3000.0, 2000.0, ">= 2,000", True, "workloads=15000"),
    ]
    single = Result("B5", "full", "simulated NVML", "cpu_s_vs_bare_loop", 1.1, 1.0, "<= 1.2x", True)
    return [json.dumps(META)] + [r.line() for r in [*sized, single]]


def _table(readme: str, bench: str) -> list[str]:
    """The data rows of `bench`'s table (after its heading, below the header and divider)."""
    block = readme.split(f"### {bench}\n", 1)[1].split("\n### ", 1)[0]
    return [ln for ln in block.splitlines() if ln.startswith("| ")][2:]


def test_report_tables_and_a_chart_only_for_the_multi_size_benchmark(tmp_path: Path) -> None:
    results = tmp_path / "results-full.jsonl"
    results.write_text("\n".join(_lines()) + "\n")
    out = tmp_path / "report"

    write_report([results], out)

    readme = (out / "README.md").read_text()
    assert _table(readme, "B3") == [
        "| makespan_s | workloads=1500 | 7 | 7 | 1 | <= 1.05x ideal | yes |",
        "| makespan_s | workloads=4950 | 22 | 20 | 1.1 | <= 1.05x ideal | **no** |",
        "| makespan_s | workloads=15000 | 66.2 | 66 | 1.003 | <= 1.05x ideal | yes |",
        "| admissions_per_s | workloads=1500 | 5000 | 2000 | 2.5 | >= 2,000 | yes |",
        "| admissions_per_s | workloads=4950 | 4000 | 2000 | 2 | >= 2,000 | yes |",
        "| admissions_per_s | workloads=15000 | 3000 | 2000 | 1.5 | >= 2,000 | yes |",
    ]
    assert _table(readme, "B5") == ["| cpu_s_vs_bare_loop | - | 1.1 | 1 | 1.1 | <= 1.2x | yes |"]
    assert "2026-12-04 10:00 UTC" in readme
    assert "test box, 2 cores" in readme
    assert "(b3-full.png)" in readme
    assert "Measured at one size, so no chart." in readme.split("### B5", 1)[1]

    assert (out / "b3-full.png").read_bytes()[:8] == PNG_SIGNATURE
    assert sorted(p.name for p in out.glob("*.png")) == ["b3-full.png"]
