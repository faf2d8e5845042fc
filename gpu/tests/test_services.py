"""Mirror functions take raw Node dicts; desired-state services audit and enqueue after commit."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.core.exceptions import ValidationError

from accounts.models import AuditLog
from gpu import services
from gpu.choices import SharingMode
from gpu.models import Node
from gpu.selectors import cross_project_nodes, plugin_config
from gpu.tests.factories import make_gpus, make_node
from tests.fixtures.personas import World, session_client

pytestmark = pytest.mark.django_db


def raw_node(
    name: str = "n1", *, unschedulable: bool = False, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": "u-1",
            "resourceVersion": "5",
            "labels": labels or {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5090"},
        },
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {
            "capacity": {"nvidia.com/gpu": "4", "cpu": "64"},
            "allocatable": {"nvidia.com/gpu": "4", "cpu": "63"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-30T00:00:00Z"}],
        },
    }


def test_node_apply_mirrors_the_raw_node() -> None:
    node = services.node_apply(raw=raw_node())
    assert (node.gpu_model, node.gpu_count, node.cordoned, node.is_ready) == (
        "NVIDIA-GeForce-RTX-5090",
        4,
        False,
        True,
    )
    assert "lastHeartbeatTime" not in node.conditions[0]


def test_a_heartbeat_only_change_writes_nothing() -> None:
    services.node_apply(raw=raw_node())
    before = Node.objects.get().synced_at
    again = raw_node()
    again["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-30T00:01:00Z"
    services.node_apply(raw=again)
    assert Node.objects.get().synced_at == before


def test_cordon_relabel_delete_and_relist() -> None:
    services.node_apply(raw=raw_node(unschedulable=True, labels={"team": "x"}))
    node = Node.objects.get()
    assert node.cordoned
    assert node.labels == {"team": "x"}
    services.node_remove(name="n1")
    assert Node.objects.get().deleted
    services.node_apply(raw=raw_node())
    assert not Node.objects.get().deleted
    services.node_apply(raw=raw_node("n2"))
    assert services.node_relist(names=["n2"]) == 1
    assert list(Node.objects.filter(deleted=False).values_list("name", flat=True)) == ["n2"]


def test_sharing_change_is_audited_and_enqueues_the_node_task(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    node = make_node()
    gpu = make_gpus(node, 1)[0]
    with (
        mock.patch("gpu.services.current_app.send_task") as send,
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.gpu_set_sharing(gpu=gpu, mode=SharingMode.SHARED, slices=4, actor=world.admin)
    send.assert_called_once_with("workloads.reconcile_node", args=[node.pk])
    assert AuditLog.objects.filter(action="gpu.sharing").exists()
    assert plugin_config(node=node) == {"gpus": {gpu.uuid: {"mode": "shared", "slices": 4}}}


def test_cross_project_sharing_is_audited_sent_to_the_plugin_and_opens_the_node(
    world: World, django_capture_on_commit_callbacks: Any
) -> None:
    node = make_node()
    first, second = make_gpus(node, 2)
    for gpu in (first, second):
        services.gpu_set_sharing(gpu=gpu, mode=SharingMode.SHARED, slices=4, actor=world.admin)
    with (
        mock.patch("gpu.services.current_app.send_task") as send,
        django_capture_on_commit_callbacks(execute=True),
    ):
        services.gpu_set_cross_project(gpu=first, allowed=True, actor=world.admin)
    send.assert_called_once_with("workloads.reconcile_node", args=[node.pk])
    assert AuditLog.objects.filter(action="gpu.cross_project").exists()
    entries = plugin_config(node=node)["gpus"]
    assert entries[first.uuid] == {"mode": "shared", "slices": 4, "cross_project": True}
    assert entries[second.uuid] == {"mode": "shared", "slices": 4}
    assert first.isolation == "cross-project (weaker)"
    assert node.name not in cross_project_nodes()  # one shared GPU of the node is still closed
    services.gpu_set_cross_project(gpu=second, allowed=True, actor=world.admin)
    assert node.name in cross_project_nodes()
    services.gpu_set_sharing(gpu=first, mode=SharingMode.EXCLUSIVE, slices=1, actor=world.admin)
    assert plugin_config(node=node)["gpus"][first.uuid] == {"mode": "exclusive"}  # whole: no flag


def test_slices_are_bounded(world: World) -> None:
    gpu = make_gpus(make_node(), 1)[0]
    with pytest.raises(ValidationError):
        services.gpu_set_sharing(gpu=gpu, mode=SharingMode.SHARED, slices=49, actor=world.admin)


def test_out_of_service_gpus_are_flagged_for_the_plugin(world: World) -> None:
    node = make_node()
    gpu = make_gpus(node, 1)[0]
    services.gpu_set_in_service(gpu=gpu, in_service=False, actor=world.admin)
    assert plugin_config(node=node)["gpus"][gpu.uuid] == {"mode": "exclusive", "in_service": False}


def test_the_sweep_resends_nodes_whose_cordon_drifted(django_capture_on_commit_callbacks: Any) -> None:
    drifted, settled = make_node("n-drift"), make_node("n-ok")
    make_gpus(settled, 1)
    Node.objects.filter(pk=drifted.pk).update(desired_cordoned=True, cordoned=False)
    Node.objects.filter(pk=settled.pk).update(desired_cordoned=True, cordoned=True)
    with (
        mock.patch("gpu.services.current_app.send_task") as send,
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert services.node_sweep() == 2  # the drifted node, and one run for the sharing ConfigMap
    assert {call.kwargs["args"][0] for call in send.call_args_list} == {drifted.pk, settled.pk}


def test_operators_mark_cross_project_in_the_admin_and_see_the_weaker_isolation(world: World) -> None:
    gpu = make_gpus(make_node(), 1)[0]
    services.gpu_set_sharing(gpu=gpu, mode=SharingMode.SHARED, slices=4, actor=world.admin)
    client = session_client(world.admin)
    assert "one project at a time" in client.get("/admin/gpu/gpu/").content.decode()
    with mock.patch("gpu.services.current_app.send_task"):
        done = client.post(
            "/admin/gpu/gpu/",
            {"action": "allow_cross_project", "_selected_action": [str(gpu.pk)]},
            follow=True,
        )
    page = done.content.decode()
    assert "share /dev/shm and the MPS daemon" in page
    assert "cross-project (weaker)" in page
    gpu.refresh_from_db()
    assert gpu.cross_project
    assert AuditLog.objects.filter(actor=world.admin, action="gpu.cross_project").exists()
