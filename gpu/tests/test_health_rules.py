"""The self-healing rule in isolation: which events count, the clean interval, the health cordon."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpu.choices import GpuHealth
from gpu.cordon import cordon_wanted
from gpu.health import is_critical_xid, next_health

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CLEAN = timedelta(seconds=60)


@pytest.mark.parametrize("xid", [48, 62, 63, 64, 74, 79, 92, 94, 95])
def test_hardware_xids_are_critical(xid: int) -> None:
    assert is_critical_xid(xid)


@pytest.mark.parametrize("xid", [None, 13, 31, 43, 45, 68, 109])
def test_application_xids_and_no_xid_are_not(xid: int | None) -> None:
    assert not is_critical_xid(xid)


def test_a_bad_observation_worsens_and_never_improves_health() -> None:
    assert (
        next_health(GpuHealth.HEALTHY, GpuHealth.UNHEALTHY, last_bad_at=T0, now=T0, clean=CLEAN)
        == "unhealthy"
    )
    assert (
        next_health(GpuHealth.UNHEALTHY, GpuHealth.DEGRADED, last_bad_at=T0, now=T0, clean=CLEAN)
        == "unhealthy"
    )
    assert (
        next_health(GpuHealth.UNKNOWN, GpuHealth.DEGRADED, last_bad_at=T0, now=T0, clean=CLEAN) == "degraded"
    )


def test_an_unhealthy_gpu_returns_only_after_the_clean_interval_at_a_clean_sample() -> None:
    early = T0 + CLEAN - timedelta(seconds=1)
    assert next_health(GpuHealth.UNHEALTHY, None, last_bad_at=T0, now=early, clean=CLEAN) == "unhealthy"
    assert next_health(GpuHealth.UNHEALTHY, None, last_bad_at=T0, now=T0 + CLEAN, clean=CLEAN) == "healthy"
    assert next_health(GpuHealth.DEGRADED, None, last_bad_at=T0, now=T0 + CLEAN, clean=CLEAN) == "healthy"


def test_a_first_clean_sample_makes_an_unknown_gpu_healthy() -> None:
    assert next_health(GpuHealth.UNKNOWN, None, last_bad_at=None, now=T0, clean=CLEAN) == "healthy"


def test_a_node_is_cordoned_when_all_its_gpus_are_out_and_uncordoned_when_one_returns() -> None:
    assert cordon_wanted(offered=[False, False], desired=None, health_cordoned=False) == (True, True)
    assert cordon_wanted(offered=[False, True], desired=True, health_cordoned=True) == (False, False)
    assert cordon_wanted(offered=[False, True], desired=None, health_cordoned=False) == (None, False)


def test_an_operators_cordon_is_never_taken_over_or_lifted_by_health() -> None:
    assert cordon_wanted(offered=[False, False], desired=True, health_cordoned=False) == (True, False)
    assert cordon_wanted(offered=[True, True], desired=True, health_cordoned=False) == (True, False)
    assert cordon_wanted(offered=[], desired=None, health_cordoned=False) == (None, False)
