"""The idle-GPU rule, pure: what one running job's recent GPU activity means for it.

A job is idle when every GPU its pods ran on stayed under the utilisation threshold and its memory
used moved by less than the memory threshold, over the whole window, with samples covering the
window from end to end (a telemetry gap is no evidence, so it never warns or suspends). The window
counts from the job's start, or from its last snooze or resume, whichever is later. Idle for the
window: warn. Still idle `warning_s` after the warning: suspend. Busy again: withdraw the warning.
`workloads.services.idle` applies the verdicts; this module reads no rows and has no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

# Samples may start this late into the window and end this long before now and still cover it:
# an agent polls every second and posts every few, the sweep runs every minute. A quarter of the
# window at most, so a short window is not judged on a fraction of it.
COVERAGE_SLACK = timedelta(seconds=90)


class Action(enum.Enum):
    NONE = "none"
    WARN = "warn"
    SUSPEND = "suspend"
    WITHDRAW = "withdraw"


class Activity(Protocol):
    """One GPU of the job over the window (gpu.selectors.PodActivity has this shape)."""

    @property
    def samples(self) -> int: ...
    @property
    def first_ts(self) -> datetime: ...
    @property
    def last_ts(self) -> datetime: ...
    @property
    def max_util_gpu(self) -> int: ...
    @property
    def min_mem_used_mib(self) -> int: ...
    @property
    def max_mem_used_mib(self) -> int: ...
    @property
    def mem_total_mib(self) -> int: ...


@dataclass(frozen=True)
class Thresholds:
    util_pct: int = 5
    mem_change_pct: int = 5
    window_s: int = 1800
    warning_s: int = 600
    max_snoozes: int = 2


@dataclass(frozen=True)
class JobIdle:
    """The idle fields of one running job."""

    started_at: datetime
    reset_at: datetime | None = None
    warned_at: datetime | None = None
    exempt: bool = False


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str = ""


class Evidence(enum.Enum):
    IDLE = "idle"
    BUSY = "busy"
    NONE = "none"


def evidence(
    gpus: Sequence[Activity], *, start: datetime, now: datetime, t: Thresholds
) -> tuple[Evidence, str]:
    """Idle, busy or no evidence over [start, now], with the numbers that decided it."""
    if not gpus:
        return Evidence.NONE, "no sample shows the job's pods on a GPU"
    util = max(g.max_util_gpu for g in gpus)
    moved = max(_mem_change_pct(g) for g in gpus)
    numbers = f"SM utilisation at most {util} % (threshold {t.util_pct} %), memory used moved {moved:.1f} % "
    numbers += f"(threshold {t.mem_change_pct} %)"
    if util >= t.util_pct or moved >= t.mem_change_pct:
        return Evidence.BUSY, numbers
    slack = min(COVERAGE_SLACK, (now - start) / 4)
    covered = min(g.first_ts for g in gpus) <= start + slack
    covered = covered and max(g.last_ts for g in gpus) >= now - slack
    return (Evidence.IDLE if covered else Evidence.NONE), numbers


def _mem_change_pct(g: Activity) -> float:
    return 100.0 * (g.max_mem_used_mib - g.min_mem_used_mib) / max(g.mem_total_mib, 1)


def decide(job: JobIdle, gpus: Sequence[Activity], *, now: datetime, t: Thresholds) -> Verdict:
    """The one step to take now for `job` (see the module docstring)."""
    if job.exempt:
        return Verdict(Action.WITHDRAW, "exempt from idle reclaim") if job.warned_at else Verdict(Action.NONE)
    counted_from = max(job.started_at, job.reset_at or job.started_at)
    if now - counted_from < timedelta(seconds=t.window_s):
        return Verdict(Action.NONE)
    seen, numbers = evidence(gpus, start=now - timedelta(seconds=t.window_s), now=now, t=t)
    if seen is Evidence.BUSY:
        return (
            Verdict(Action.WITHDRAW, f"GPUs busy again: {numbers}") if job.warned_at else Verdict(Action.NONE)
        )
    if seen is Evidence.NONE:
        return Verdict(Action.NONE)
    minutes = round(t.window_s / 60)
    if job.warned_at is None:
        return Verdict(Action.WARN, f"GPUs idle for {minutes} min: {numbers}")
    if now >= job.warned_at + timedelta(seconds=t.warning_s):
        return Verdict(Action.SUSPEND, f"GPUs idle for {minutes} min and after the warning: {numbers}")
    return Verdict(Action.NONE)


def hung(
    gpus: Sequence[Activity], *, was_busy: bool, now: datetime, window_s: int, t: Thresholds
) -> tuple[Evidence, str]:
    """A job of several workers whose collective may be hung: every GPU of every worker idle over
    the last `window_s` (as idle reclaim judges idle) after the job had been busy. IDLE: flag it;
    BUSY: clear a flag; NONE: no verdict (never busy yet, or a telemetry gap)."""
    seen, numbers = evidence(gpus, start=now - timedelta(seconds=window_s), now=now, t=t)
    if seen is Evidence.IDLE and not was_busy:
        return Evidence.NONE, numbers
    return seen, numbers


def reclaimed_gpu_hours(
    *, suspended_at: datetime, until: datetime, started_at: datetime | None, max_runtime_s: float, gpus: float
) -> float:
    """GPU-hours an idle-suspended job gave back from its suspension to `until` (resume, cancel or
    now), capped by what its max runtime had left: it could not have held the GPUs longer."""
    left = max_runtime_s - (suspended_at - started_at).total_seconds() if started_at else max_runtime_s
    seconds = min(max(0.0, (until - suspended_at).total_seconds()), max(0.0, left))
    return gpus * seconds / 3600
