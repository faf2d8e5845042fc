"""The idle-GPU rule on its own (no database): busy never warned, idle warned, suspended after the
warning period, a snooze restarts the window, gaps in telemetry are no evidence, exempt never."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from workloads.idle_rules import Action, JobIdle, Thresholds, decide, reclaimed_gpu_hours

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
T = Thresholds(util_pct=5, mem_change_pct=5, window_s=1800, warning_s=600, max_snoozes=2)
STARTED = NOW - timedelta(hours=1)


@dataclass(frozen=True)
class Gpu:
    samples: int = 1800
    first_ts: datetime = NOW - timedelta(seconds=1800)
    last_ts: datetime = NOW
    max_util_gpu: int = 1
    min_mem_used_mib: int = 9000
    max_mem_used_mib: int = 9100
    mem_total_mib: int = 32768


def test_a_busy_job_is_never_warned() -> None:
    verdict = decide(JobIdle(STARTED), [Gpu(max_util_gpu=40)], now=NOW, t=T)
    assert verdict.action is Action.NONE


def test_memory_activity_alone_keeps_a_job_busy() -> None:
    # 9000 -> 12000 MiB of 32 GiB is a 9 % move: the job is loading data, not idle.
    verdict = decide(JobIdle(STARTED), [Gpu(max_mem_used_mib=12000)], now=NOW, t=T)
    assert verdict.action is Action.NONE


def test_an_idle_job_is_warned_with_the_numbers() -> None:
    verdict = decide(JobIdle(STARTED), [Gpu()], now=NOW, t=T)
    assert verdict.action is Action.WARN
    assert "idle for 30 min" in verdict.reason
    assert "at most 1 %" in verdict.reason


def test_one_busy_gpu_of_two_keeps_the_job_busy() -> None:
    assert decide(JobIdle(STARTED), [Gpu(), Gpu(max_util_gpu=80)], now=NOW, t=T).action is Action.NONE


def test_a_job_younger_than_the_window_is_not_judged() -> None:
    young = JobIdle(NOW - timedelta(minutes=20))
    assert decide(young, [Gpu()], now=NOW, t=T).action is Action.NONE


def test_a_gap_in_telemetry_is_no_evidence() -> None:
    late_start = Gpu(first_ts=NOW - timedelta(minutes=10))
    stale = Gpu(last_ts=NOW - timedelta(minutes=5))
    assert decide(JobIdle(STARTED), [late_start], now=NOW, t=T).action is Action.NONE
    assert decide(JobIdle(STARTED), [stale], now=NOW, t=T).action is Action.NONE
    assert decide(JobIdle(STARTED), [], now=NOW, t=T).action is Action.NONE


def test_suspension_comes_only_after_the_warning_period() -> None:
    warned = JobIdle(STARTED, warned_at=NOW - timedelta(minutes=9))
    assert decide(warned, [Gpu()], now=NOW, t=T).action is Action.NONE
    warned = JobIdle(STARTED, warned_at=NOW - timedelta(minutes=10))
    assert decide(warned, [Gpu()], now=NOW, t=T).action is Action.SUSPEND


def test_busy_again_withdraws_the_warning() -> None:
    warned = JobIdle(STARTED, warned_at=NOW - timedelta(minutes=15))
    verdict = decide(warned, [Gpu(max_util_gpu=70)], now=NOW, t=T)
    assert verdict.action is Action.WITHDRAW
    assert "busy again" in verdict.reason


def test_a_snooze_restarts_the_window() -> None:
    snoozed = JobIdle(STARTED, reset_at=NOW - timedelta(minutes=29))
    assert decide(snoozed, [Gpu()], now=NOW, t=T).action is Action.NONE
    snoozed = JobIdle(STARTED, reset_at=NOW - timedelta(minutes=30))
    assert decide(snoozed, [Gpu()], now=NOW, t=T).action is Action.WARN


@pytest.mark.parametrize("warned", [None, NOW - timedelta(hours=1)])
def test_an_exempt_job_is_never_warned_nor_suspended(warned: datetime | None) -> None:
    verdict = decide(JobIdle(STARTED, warned_at=warned, exempt=True), [Gpu()], now=NOW, t=T)
    assert verdict.action is (Action.WITHDRAW if warned else Action.NONE)


def test_reclaimed_hours_run_from_the_suspension_capped_by_the_runtime_left() -> None:
    suspended = NOW - timedelta(hours=2)
    started = suspended - timedelta(hours=1)

    def hours(max_runtime_h: float) -> float:
        return reclaimed_gpu_hours(
            suspended_at=suspended,
            until=NOW,
            started_at=started,
            max_runtime_s=max_runtime_h * 3600,
            gpus=2.0,
        )

    assert hours(8) == pytest.approx(4.0)
    # Max runtime 2 h, 1 h used before the suspension: at most 1 h more per GPU could be held.
    assert hours(2) == pytest.approx(2.0)


def test_a_short_window_must_be_covered_nearly_whole() -> None:
    short = Thresholds(window_s=60, warning_s=30)
    half = Gpu(first_ts=NOW - timedelta(seconds=30))
    assert decide(JobIdle(STARTED), [half], now=NOW, t=short).action is Action.NONE
    assert (
        decide(JobIdle(STARTED), [Gpu(first_ts=NOW - timedelta(seconds=50))], now=NOW, t=short).action
        is Action.WARN
    )
