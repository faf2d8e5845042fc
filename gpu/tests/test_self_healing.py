"""Self-healing GPUs through the real ingest endpoint: out on a critical event, back after a clean
interval and a clean sample; the failure is announced with the GPU's pods; the node cordon follows."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from accounts.models import AuditLog
from gpu import selectors, services
from gpu.choices import GpuEventKind, GpuHealth
from gpu.models import Gpu, GpuEvent, Node
from gpu.signals import gpu_failed
from gpu.tests.factories import batch, make_gpus, make_node, node_token, sample
from tests.fixtures.personas import World, session_client

URL = "/api/v1/ingest/samples"
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sends() -> Iterator[mock.MagicMock]:
    with mock.patch("gpu.services.current_app.send_task") as send:
        yield send


@pytest.fixture
def failures() -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def receiver(sender: object, **kwargs: Any) -> None:
        seen.append(kwargs)

    gpu_failed.connect(receiver, dispatch_uid="test-self-healing")
    yield seen
    gpu_failed.disconnect(dispatch_uid="test-self-healing")


def post(node: Node, samples: list[dict[str, Any]]) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {node_token(node)}")
    assert client.post(URL, batch(node.name, samples), format="json").status_code == 200


def _fresh(*gpus: Gpu) -> list[Gpu]:
    return [Gpu.objects.get(pk=g.pk) for g in gpus]


@override_settings(GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS=30)
def test_a_critical_xid_puts_a_gpu_out_and_a_clean_interval_brings_it_back(
    sends: mock.MagicMock, failures: list[dict[str, Any]]
) -> None:
    node = make_node(gpus=2)
    bad, good = make_gpus(node, 2)
    t0 = datetime.now(UTC) - timedelta(seconds=120)
    post(node, [sample(bad.uuid, t0, xid=79, namespace="gp-alpha", pod="job-abc-0"), sample(good.uuid, t0)])
    bad, good = _fresh(bad, good)
    assert (bad.health, bad.health_reason, good.health) == (GpuHealth.UNHEALTHY, "XID 79", GpuHealth.HEALTHY)
    assert failures == [
        {
            "signal": gpu_failed,
            "node": node.name,
            "gpu_uuid": bad.uuid,
            "reason": "XID 79",
            "pods": [("gp-alpha", "job-abc-0")],
        }
    ]
    assert selectors.plugin_config()["gpus"][bad.uuid] == {"mode": "exclusive", "in_service": False}
    assert sends.call_args.args == ("workloads.reconcile_node",)
    post(node, [sample(bad.uuid, t0 + timedelta(seconds=29))])  # clean, but inside the interval
    assert _fresh(bad)[0].health == GpuHealth.UNHEALTHY
    post(node, [sample(bad.uuid, t0 + timedelta(seconds=31))])
    bad = _fresh(bad)[0]
    assert (bad.health, bad.health_reason) == (GpuHealth.HEALTHY, "")
    assert selectors.plugin_config()["gpus"][bad.uuid] == {"mode": "exclusive"}
    history = list(
        GpuEvent.objects.filter(gpu=bad, kind=GpuEventKind.HEALTH).values_list("message", flat=True)
    )
    assert history == [
        "unhealthy -> healthy: clean interval passed, clean sample",
        "unknown -> unhealthy: XID 79",
    ]
    assert len(failures) == 1


@override_settings(GPUPORTAL_GPU_HEALTH_CLEAN_SECONDS=30)
def test_a_new_critical_event_restarts_the_clean_interval(sends: mock.MagicMock) -> None:
    node = make_node(gpus=1)
    (gpu,) = make_gpus(node, 1)
    t0 = datetime.now(UTC) - timedelta(seconds=120)
    post(node, [sample(gpu.uuid, t0, ecc_dbe=1)])
    assert _fresh(gpu)[0].health_reason == "ECC double-bit error"
    post(node, [sample(gpu.uuid, t0 + timedelta(seconds=20), ecc_dbe=1, xid=48)])
    post(node, [sample(gpu.uuid, t0 + timedelta(seconds=35), ecc_dbe=1)])
    assert _fresh(gpu)[0].health == GpuHealth.UNHEALTHY  # 15 s after the XID 48
    post(node, [sample(gpu.uuid, t0 + timedelta(seconds=51), ecc_dbe=1)])
    assert _fresh(gpu)[0].health == GpuHealth.HEALTHY


def test_an_application_xid_changes_nothing(sends: mock.MagicMock, failures: list[dict[str, Any]]) -> None:
    node = make_node(gpus=1)
    (gpu,) = make_gpus(node, 1)
    post(node, [sample(gpu.uuid, xid=43, namespace="gp-alpha", pod="job-abc-0")])
    gpu = _fresh(gpu)[0]
    assert (gpu.health, gpu.offered, failures) == (GpuHealth.HEALTHY, True, [])
    assert not Node.objects.get(pk=node.pk).desired_cordoned


def test_the_node_is_cordoned_when_all_its_gpus_are_out_and_uncordoned_when_one_returns(
    sends: mock.MagicMock, world: World
) -> None:
    node = make_node(gpus=2)
    a, b = make_gpus(node, 2)
    post(node, [sample(a.uuid, xid=79)])
    assert Node.objects.get(pk=node.pk).desired_cordoned is None
    post(node, [sample(b.uuid, ecc_dbe=3)])
    node.refresh_from_db()
    assert (node.desired_cordoned, node.health_cordoned) == (True, True)
    assert AuditLog.objects.filter(action="node.health_cordon", actor=None).count() == 1
    services.gpu_force_health(gpu=_fresh(a)[0], healthy=True, actor=world.admin)
    node.refresh_from_db()
    assert (node.desired_cordoned, node.health_cordoned) == (False, False)


def test_operators_force_either_way_audited(
    sends: mock.MagicMock, failures: list[dict[str, Any]], world: World
) -> None:
    node = make_node(gpus=2)
    gpu, _ = make_gpus(node, 2)
    services.gpu_force_health(gpu=gpu, healthy=False, actor=world.admin, reason="burn-in failed")
    gpu = _fresh(gpu)[0]
    assert (gpu.health, gpu.health_reason, gpu.offered) == (GpuHealth.UNHEALTHY, "burn-in failed", False)
    assert [f["reason"] for f in failures] == ["burn-in failed"]
    services.gpu_force_health(gpu=gpu, healthy=True, actor=world.admin)
    gpu = _fresh(gpu)[0]
    assert (gpu.health, gpu.last_bad_at, gpu.offered) == (GpuHealth.HEALTHY, None, True)
    actions = list(AuditLog.objects.filter(actor=world.admin).values_list("action", flat=True))
    assert sorted(actions) == ["gpu.health_clear", "gpu.health_fault"]


def test_operators_see_the_history_and_force_from_the_admin(sends: mock.MagicMock, world: World) -> None:
    node = make_node(gpus=1)
    (gpu,) = make_gpus(node, 1)
    post(node, [sample(gpu.uuid, xid=94)])
    client = session_client(world.admin)
    page = client.get(f"/admin/gpu/gpu/{gpu.pk}/change/").content.decode()
    assert "XID 94 (critical)" in page
    assert "unknown -&gt; unhealthy: XID 94" in page
    client.post("/admin/gpu/gpu/", {"action": "force_healthy", "_selected_action": [str(gpu.pk)]})
    assert _fresh(gpu)[0].health == GpuHealth.HEALTHY
    client.post("/admin/gpu/gpu/", {"action": "force_unhealthy", "_selected_action": [str(gpu.pk)]})
    assert _fresh(gpu)[0].health_reason == "forced by an operator"
    assert AuditLog.objects.filter(actor=world.admin, action__startswith="gpu.health_").count() == 2


def test_gpus_unhealthy_before_the_upgrade_wait_one_clean_interval_from_it() -> None:
    from importlib import import_module

    from django.apps import apps

    migration = import_module("gpu.migrations.0003_gpu_self_healing")
    node = make_node(gpus=2)
    old_bad, fine = make_gpus(node, 2)
    Gpu.objects.filter(pk=old_bad.pk).update(health=GpuHealth.UNHEALTHY)
    migration.start_the_clock(apps, None)
    old_bad, fine = _fresh(old_bad, fine)
    assert old_bad.last_bad_at is not None
    assert fine.last_bad_at is None
    with mock.patch("gpu.services.current_app.send_task"):
        post(node, [sample(old_bad.uuid)])
    assert _fresh(old_bad)[0].health == GpuHealth.UNHEALTHY


def test_taking_every_gpu_of_a_node_out_of_service_cordons_it_too(
    sends: mock.MagicMock, world: World
) -> None:
    node = make_node(gpus=2)
    a, b = make_gpus(node, 2)
    services.gpu_set_in_service(gpu=a, in_service=False, actor=world.admin)
    assert Node.objects.get(pk=node.pk).desired_cordoned is None
    services.gpu_set_in_service(gpu=b, in_service=False, actor=world.admin)
    assert Node.objects.get(pk=node.pk).desired_cordoned is True
    services.gpu_set_in_service(gpu=b, in_service=True, actor=world.admin)
    node.refresh_from_db()
    assert (node.desired_cordoned, node.health_cordoned) == (False, False)
