"""The recovery rule, on a fake clock."""

from __future__ import annotations

from plugin.health import HealthRule


def test_a_critical_xid_holds_until_a_clean_interval_passes() -> None:
    rule = HealthRule(["a", "b"], recovery_s=10)
    rule.on_xid("a", 48, now=100)
    assert rule.status(105) == {"a": "XID 48", "b": None}
    rule.on_xid("a", 62, now=108)  # a new event restarts the clean interval
    assert rule.status(115)["a"] == "XID 62"
    assert rule.status(118.5)["a"] is None


def test_application_xids_never_make_a_gpu_unhealthy() -> None:
    rule = HealthRule(["a"], recovery_s=10)
    for xid in (13, 31, 43, 45, 68, 109):
        assert rule.on_xid("a", xid, now=1) is False
    assert rule.status(1) == {"a": None}


def test_xid_79_never_recovers() -> None:
    rule = HealthRule(["a"], recovery_s=1)
    rule.on_xid("a", 79, now=0)
    assert rule.status(10_000)["a"] == "XID 79"


def test_an_nvml_failure_fails_every_gpu_closed_until_a_clean_interval_after_it_ends() -> None:
    rule = HealthRule(["a", "b"], recovery_s=5)
    rule.on_nvml_failure("Unknown Error", now=10)
    assert all(rule.status(11).values())
    rule.on_nvml_ok()
    assert all(rule.status(12).values())
    assert rule.status(15.5) == {"a": None, "b": None}
