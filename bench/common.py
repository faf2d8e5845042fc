"""The one result shape every benchmark prints: a JSON line per metric, nothing else on stdout."""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import asdict, dataclass
from typing import Literal

Profile = Literal["ci", "full"]


@dataclass(frozen=True)
class Result:
    """One measured metric, ours next to the reference measured in the same run."""

    bench: str
    profile: str
    backend: str
    metric: str
    ours: float
    reference: float
    goal: str
    passed: bool
    # Which step of a multi-size run ("nodes=300", "workloads=5000"); "" for a run at the profile's one
    # size. Last and defaulted so every existing positional Result(...) call stays valid.
    size: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.reference if self.reference else float("inf")

    def line(self) -> str:
        row = asdict(self)
        row["pass"] = row.pop("passed")
        row["ratio"] = round(self.ratio, 4)
        row["ours"] = round(self.ours, 6)
        row["reference"] = round(self.reference, 6)
        return json.dumps(row)


def emit(result: Result) -> None:
    sys.stdout.write(result.line() + "\n")
    sys.stdout.flush()


def log(message: str) -> None:
    """Progress goes to stderr so stdout stays machine-readable."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, int(pct) - 1))]
