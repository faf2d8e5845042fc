"""Operator actions reach the real cluster: cordon patches the Node, sharing reaches the plugin config."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpu import app_settings, services
from gpu.choices import SharingMode
from gpu.tests.factories import make_gpus
from tests.fixtures.personas import World, session_client
from tests.gpu_e2e.helpers import new_node
from workloads.k8s.client import RealKubeClient, set_client
from workloads.tasks import reconcile_node

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


@pytest.fixture
def cluster_node(kube: RealKubeClient) -> Any:
    name, manifest = new_node("gpu-ops")
    kube.create("/api/v1/nodes", manifest)
    namespace = app_settings.plugin_config_namespace()
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    set_client(kube)
    node = services.node_apply(raw=kube.get(f"/api/v1/nodes/{name}") or {})
    yield node
    set_client(None)
    kube.delete(f"/api/v1/nodes/{name}")


def _run_enqueued(send: Any) -> None:
    """What the worker does with the task the admin action sent by name (never run eagerly)."""
    for call in send.call_args_list:
        assert call.args[0] == "workloads.reconcile_node"
        reconcile_node(*call.kwargs["args"])


def test_cordon_from_the_admin_reaches_the_cluster(
    world: World, cluster_node: Any, kube: RealKubeClient, django_capture_on_commit_callbacks: Any
) -> None:
    from unittest import mock

    client = session_client(world.admin)
    with (
        mock.patch("gpu.services.current_app.send_task") as send,
        django_capture_on_commit_callbacks(execute=True),
    ):
        client.post("/admin/gpu/node/", {"action": "cordon", "_selected_action": [str(cluster_node.pk)]})
    _run_enqueued(send)
    assert (kube.get(f"/api/v1/nodes/{cluster_node.name}") or {})["spec"]["unschedulable"] is True
    services.node_set_cordon(node=cluster_node, cordoned=False, actor=world.admin)
    reconcile_node(cluster_node.pk)
    assert not (kube.get(f"/api/v1/nodes/{cluster_node.name}") or {})["spec"].get("unschedulable", False)


def test_a_gpu_mode_change_reaches_the_plugin_config_map(
    world: World, cluster_node: Any, kube: RealKubeClient
) -> None:
    shared, exclusive = make_gpus(cluster_node, 2)
    services.gpu_set_sharing(gpu=shared, mode=SharingMode.SHARED, slices=4, actor=world.admin)
    reconcile_node(cluster_node.pk)
    namespace, name = app_settings.plugin_config_namespace(), app_settings.plugin_config_name()
    path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
    config = json.loads((kube.get(path) or {})["data"][app_settings.plugin_config_key()])
    assert config["gpus"][shared.uuid] == {"mode": "shared", "slices": 4}
    assert config["gpus"][exclusive.uuid] == {"mode": "exclusive"}
    services.gpu_set_sharing(gpu=shared, mode=SharingMode.EXCLUSIVE, slices=1, actor=world.admin)
    services.gpu_set_in_service(gpu=exclusive, in_service=False, actor=world.admin)
    reconcile_node(cluster_node.pk)
    config = json.loads((kube.get(path) or {})["data"][app_settings.plugin_config_key()])
    assert config["gpus"][shared.uuid] == {"mode": "exclusive"}
    assert config["gpus"][exclusive.uuid] == {"mode": "exclusive", "in_service": False}
