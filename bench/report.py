"""`python -m bench.report <results.jsonl> ... --out docs/benchmarks`: tables and charts from saved runs.

Input: files of `python -m bench` stdout (one JSON line per metric, bench/common.py), each led by an
optional header line `{"meta": {...}}` that describes the run of the lines after it (date, machine,
commit; `python -m bench.report --header` prints one, and `make bench-report` puts it first).

Output under --out: README.md with a table per profile and benchmark (metric, size, ours, reference,
ratio, goal, pass), and `<bench>-<profile>.png` for each benchmark measured at several sizes
(`python -m bench --sizes`): ours beside the reference against size, one panel per metric. A
benchmark measured at one size has no chart: one point draws no trend.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

PROFILE_ORDER = ("full", "ci")  # the numbers the goals are about first


@dataclass(frozen=True)
class Row:
    """One saved result line."""

    bench: str
    profile: str
    backend: str
    metric: str
    size: str
    ours: float
    reference: float
    ratio: float
    goal: str
    passed: bool

    @classmethod
    def from_json(cls, line: dict[str, Any]) -> Row:
        numbers = (float(line["ours"]), float(line["reference"]), float(line["ratio"]))
        # "size" is absent from lines saved before multi-size runs existed: those ran at one size.
        labels = (line["bench"], line["profile"], line["backend"], line["metric"], line.get("size", ""))
        return cls(*labels, *numbers, line["goal"], bool(line["pass"]))


@dataclass
class Section:
    """Everything saved for one profile: the runs' headers and the rows per benchmark."""

    metas: list[dict[str, Any]] = field(default_factory=list)
    benches: dict[str, list[Row]] = field(default_factory=dict)


# ---- reading ---------------------------------------------------------------------------------------


def read_results(paths: Iterable[Path]) -> dict[str, Section]:
    """Rows grouped by profile, then benchmark. A line that is not JSON stops the report: a damaged
    results file should be seen, not drawn from in part."""
    sections: dict[str, Section] = {}
    for path in paths:
        meta: dict[str, Any] = {"file": path.name}
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line: {text[:80]!r}") from exc
            if "meta" in line:
                meta = {"file": path.name, **line["meta"]}
                continue
            row = Row.from_json(line)
            section = sections.setdefault(row.profile, Section())
            if meta not in section.metas:
                section.metas.append(meta)
            section.benches.setdefault(row.bench, []).append(row)
    return sections


def size_value(size: str) -> tuple[str, float | None]:
    """`nodes=300` -> ("nodes", 300.0); a size that is not `name=number` has no position on an axis."""
    name, _, value = size.partition("=")
    try:
        return name, float(value)
    except ValueError:
        return name, None


def sizes_of(rows: list[Row]) -> list[str]:
    """The benchmark's distinct sizes, smallest first ("" is a run at the profile's one size)."""
    found = {r.size for r in rows if r.size}
    return sorted(found, key=lambda s: (size_value(s)[1] is None, size_value(s)[1] or 0.0, s))


def multi_size_metrics(rows: list[Row]) -> list[str]:
    """The metrics measured at two sizes or more, in the benchmark's order: the ones a chart can draw."""
    sizes: dict[str, set[str]] = {}
    for r in rows:
        if r.size:
            sizes.setdefault(r.metric, set()).add(r.size)
    return [metric for metric, found in sizes.items() if len(found) > 1]


def chart_name(bench: str, profile: str) -> str:
    return f"{bench.lower()}-{profile}.png"


# ---- the README ------------------------------------------------------------------------------------


def number(value: float) -> str:
    if math.isinf(value) or math.isnan(value):
        return str(value)
    return f"{value:.4g}"


def table(rows: list[Row]) -> list[str]:
    """Rows in the benchmark's own metric order, each metric's sizes smallest first."""
    order = {m: i for i, m in enumerate(dict.fromkeys(r.metric for r in rows))}
    rank = {s: i for i, s in enumerate(sizes_of(rows))}
    lines = [
        "| metric | size | ours | reference | ratio | goal | pass |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(rows, key=lambda r: (order[r.metric], rank.get(r.size, -1))):
        cells = [
            r.metric,
            r.size or "-",
            number(r.ours),
            number(r.reference),
            number(r.ratio),
            r.goal,
            "yes" if r.passed else "**no**",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def profile_rank(profile: str) -> tuple[int, str]:
    known = profile in PROFILE_ORDER
    return (PROFILE_ORDER.index(profile) if known else len(PROFILE_ORDER), profile)


def describe(meta: dict[str, Any]) -> str:
    # "; " between fields: the machine's own description has commas in it.
    fields = "; ".join(
        f"{key}: {meta[key]}" for key in ("date", "machine", "python", "commit") if meta.get(key)
    )
    return f"- `{meta['file']}`: {fields or 'no header line (date and machine unknown)'}"


def bench_block(bench: str, profile: str, rows: list[Row], charted: bool) -> list[str]:
    backends = ", ".join(dict.fromkeys(r.backend for r in rows))
    lines = [f"### {bench}", "", f"Backend: {backends}.", ""]
    if charted:
        lines += [f"![{bench} ({profile}): cost against size]({chart_name(bench, profile)})", ""]
    else:
        lines += ["Measured at one size, so no chart.", ""]
    return [*lines, *table(rows), ""]


def readme(sections: dict[str, Section], charted: set[tuple[str, str]]) -> str:
    lines = [
        "# Benchmark results",
        "",
        "Written by `make bench-report` (bench/report.py) from saved `python -m bench` runs; redraw with",
        "`make bench-report RESULTS=<files>` rather than editing. Each bench/ module's docstring says what",
        "it measures against which reference. ratio = ours / reference, both measured in the same run on",
        "the same machine. A chart shows cost against size, ours beside the reference (a flat ratio is the",
        "goal); a benchmark measured at one size (no `run_sizes` yet) has its table but no chart.",
        "",
    ]
    for profile in sorted(sections, key=profile_rank):
        section = sections[profile]
        lines += [f"## {profile} profile", "", "Runs:", *map(describe, section.metas), ""]
        for bench in sorted(section.benches):
            lines += bench_block(bench, profile, section.benches[bench], (bench, profile) in charted)
    return "\n".join(lines).rstrip() + "\n"


# ---- the charts ------------------------------------------------------------------------------------


def draw_chart(bench: str, profile: str, rows: list[Row], path: Path) -> None:
    """One panel per metric measured at several sizes: ours and the reference against size, the ratio
    per size in the panel title (a flat ratio is the goal; one that grows names a cost not linear)."""
    sizes, metrics = sizes_of(rows), multi_size_metrics(rows)
    cols = min(3, len(metrics))
    rows_n = math.ceil(len(metrics) / cols)
    fig = Figure(figsize=(4.6 * cols, 3.4 * rows_n), layout="constrained")
    FigureCanvasAgg(fig)  # rendered off-screen by Agg: no display, no pyplot state kept between charts
    for i, metric in enumerate(metrics):
        panel(fig.add_subplot(rows_n, cols, i + 1), metric, [r for r in rows if r.metric == metric], sizes)
    fig.suptitle(f"{bench} ({profile}): cost against size")
    fig.savefig(path, format="png", dpi=100)


def panel(ax: Axes, metric: str, rows: list[Row], sizes: list[str]) -> None:
    by_size = {r.size: r for r in rows if r.size}
    shown = [s for s in sizes if s in by_size]
    values = [size_value(s)[1] for s in shown]
    numeric = all(v is not None and v > 0 for v in values)
    xs: list[float] = [v or 0.0 for v in values] if numeric else [float(i) for i in range(len(shown))]
    ax.plot(xs, [by_size[s].ours for s in shown], "o-", label="ours")
    ax.plot(xs, [by_size[s].reference for s in shown], "s--", label="reference")
    if numeric:
        ax.set_xscale("log")  # the sizes span a decade; a log axis spaces them evenly
    ax.set_xticks(xs, [s.partition("=")[2] or s for s in shown])
    ax.minorticks_off()
    ax.set_xlabel(size_value(shown[0])[0] if shown else "size")
    ratios = " / ".join(number(by_size[s].ratio) for s in shown)
    ax.set_title(f"{metric}\nratio {ratios}", fontsize=9)
    ax.legend(fontsize=8)


def write_report(paths: list[Path], out: Path) -> list[Path]:
    """README.md and the charts under `out`; returns what was written."""
    sections = read_results(paths)
    out.mkdir(parents=True, exist_ok=True)
    written, charted = [], set()
    for profile, section in sections.items():
        for bench, rows in section.benches.items():
            if multi_size_metrics(rows):
                path = out / chart_name(bench, profile)
                draw_chart(bench, profile, rows, path)
                charted.add((bench, profile))
                written.append(path)
    (out / "README.md").write_text(readme(sections, charted))
    return [out / "README.md", *written]


# ---- the run header --------------------------------------------------------------------------------


def header() -> dict[str, Any]:
    """Where and when a run happened, so the numbers can be read against their machine."""
    return {
        "meta": {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "python": platform.python_version(),
            "commit": commit(),
        }
    }


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        cpu = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")), cpu)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.release()}"


def commit() -> str:
    """The commit, marked "+changes" when the tree had uncommitted work (numbers from unsaved code)."""
    try:
        head, dirty = (git("rev-parse", "--short", "HEAD"), git("status", "--porcelain"))
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+changes" if dirty else "")


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report")
    parser.add_argument("results", nargs="*", type=Path, help="saved stdout of `python -m bench` runs")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks"))
    parser.add_argument("--header", action="store_true", help="print a run header line and exit")
    args = parser.parse_args(argv)
    if args.header:
        print(json.dumps(header()))
        return 0
    if not args.results:
        parser.error("name at least one results file")
    for path in write_report(args.results, args.out):
        sys.stderr.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
