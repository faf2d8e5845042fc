"""Pages, admin actions and /metrics: who may open what, and what an action changes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.test import Client, override_settings
from django.utils import timezone

from accounts.models import AuditLog
from gpu import services
from gpu.choices import SharingMode
from gpu.models import Gpu, Node, NodeToken
from gpu.tests.factories import make_gpus, make_node
from tests.fixtures.personas import World, session_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def node(world: World) -> Node:
    node = make_node("gpu-node-3")
    make_gpus(node, 2)
    return node


def test_the_cluster_map_needs_a_sign_in(node: Node) -> None:
    assert Client().get("/cluster/").status_code == 302


def test_the_cluster_map_lists_every_gpu_with_csp_safe_markup(world: World, node: Node) -> None:
    response = session_client(world.member).get("/cluster/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('class="gpu-tile"') == 2
    assert "style=" not in html
    assert 'id="gpu-initial"' in html


def test_the_node_page_renders_its_history(world: World, node: Node) -> None:
    response = session_client(world.admin).get(f"/cluster/nodes/{node.name}/")
    assert response.status_code == 200
    assert b'data-gpu-node="/ws/nodes/gpu-node-3/"' in response.content
    assert session_client(world.admin).get("/cluster/nodes/nope/").status_code == 404


def test_admin_change_pages_carry_the_live_panel(world: World, node: Node) -> None:
    client = session_client(world.admin)
    page = client.get(f"/admin/gpu/node/{node.pk}/change/")
    assert page.status_code == 200
    assert b'data-gpu-live="/ws/nodes/gpu-node-3/"' in page.content
    gpu = node.gpus.first()
    assert gpu is not None
    assert b"gpu/admin_panel.js" in client.get(f"/admin/gpu/gpu/{gpu.pk}/change/").content


def _action(client: Client, model: str, action: str, pks: list[int], **extra: Any) -> Any:
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], **extra}
    return client.post(f"/admin/gpu/{model}/", data)


def test_admin_cordon_and_sharing_actions_set_intent_and_enqueue(
    world: World, node: Node, django_capture_on_commit_callbacks: Any
) -> None:
    client = session_client(world.admin)
    patch = mock.patch("gpu.services.current_app.send_task")
    with patch as send, django_capture_on_commit_callbacks(execute=True):
        assert _action(client, "node", "cordon", [node.pk]).status_code == 302
        gpus = list(node.gpus.all())
        _action(client, "gpu", "set_shared", [g.pk for g in gpus], slices="6")
        _action(client, "gpu", "take_out_of_service", [gpus[0].pk])
    node.refresh_from_db()
    assert node.desired_cordoned is True
    assert set(Gpu.objects.values_list("sharing_mode", "slices")) == {(SharingMode.SHARED, 6)}
    assert not Gpu.objects.get(pk=gpus[0].pk).in_service
    assert {"node.cordon", "gpu.sharing", "gpu.service"} <= set(
        AuditLog.objects.values_list("action", flat=True)
    )
    assert send.call_count == 1 + 2 + 1  # one per changed object, after commit
    send.assert_any_call("workloads.reconcile_node", args=[node.pk])


def test_admin_creates_an_agent_token_once(world: World, node: Node) -> None:
    response = _action(session_client(world.admin), "node", "create_agent_token", [node.pk])
    assert response.status_code == 302
    token = NodeToken.objects.get(node=node)
    assert token.digest
    assert "gpn_" not in token.digest


def test_a_new_agent_token_never_travels_in_a_cookie(world: World, node: Node) -> None:
    client = session_client(world.admin)
    response = _action(client, "node", "create_agent_token", [node.pk])
    assert "messages" not in response.cookies  # Django's default keeps messages in a cookie
    page = client.get(response["Location"]).content.decode()
    assert "gpn_" in page  # shown once, from the session


def test_agent_tokens_expire_and_a_rotation_overlaps_for_a_day(world: World, node: Node) -> None:
    with override_settings(GPUPORTAL_NODE_TOKEN_DAYS=30):
        old, old_secret = services.node_token_create(node=node)
    assert timedelta(days=29) < old.expires_at - timezone.now() <= timedelta(days=30)
    assert services.node_token_authenticate(secret=old_secret) == old

    response = _action(session_client(world.admin), "nodetoken", "rotate", [old.pk])
    assert response.status_code == 302
    new = NodeToken.objects.exclude(pk=old.pk).get(node=node)
    old.refresh_from_db()
    assert timedelta(hours=23) < old.expires_at - timezone.now() <= timedelta(hours=24)
    assert new.name == old.name
    assert "node_token.rotate" in set(AuditLog.objects.values_list("action", flat=True))
    assert services.node_token_authenticate(secret=old_secret) == old  # still, for the overlap

    NodeToken.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert services.node_token_authenticate(secret=old_secret) is None


def test_metrics_need_a_token_or_staff(world: World, node: Node) -> None:
    assert Client().get("/metrics").status_code == 401
    assert session_client(world.member).get("/metrics").status_code == 401
    staff = session_client(world.admin).get("/metrics")
    assert staff.status_code == 200
    assert b"gpuportal_gpus" in staff.content
    with override_settings(GPU_METRICS_TOKEN="s3cret-metrics-token"):
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token").status_code == 200
        assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


def test_nodes_api_lists_inventory(world: World, node: Node) -> None:
    from tests.fixtures.personas import api_client

    body = api_client(world.member).get("/api/v1/nodes/").json()
    assert body["results"][0]["name"] == "gpu-node-3"
    assert len(body["results"][0]["gpus"]) == 2


def test_mirrored_nodes_and_gpus_cannot_be_deleted_from_the_admin(world: World, node: Node) -> None:
    gpu = Gpu.objects.filter(node=node).first() or make_gpus(node, 1)[0]
    client = session_client(world.admin)
    assert client.get(f"/admin/gpu/node/{node.pk}/delete/").status_code == 403
    assert client.get(f"/admin/gpu/gpu/{gpu.pk}/delete/").status_code == 403
    assert "deletelink" not in client.get(f"/admin/gpu/node/{node.pk}/change/").content.decode()
    assert Node.objects.filter(pk=node.pk).exists()


def test_the_node_admin_shows_labels_capacity_and_conditions_as_lines_not_json(
    world: World, node: Node
) -> None:
    Node.objects.filter(pk=node.pk).update(
        labels={"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5090", "type": "kwok"},
        capacity={"nvidia.com/gpu": "4"},
        conditions=[{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"}],
    )
    page = session_client(world.admin).get(f"/admin/gpu/node/{node.pk}/change/").content.decode()
    assert "nvidia.com/gpu.product: NVIDIA-GeForce-RTX-5090<br>type: kwok" in page
    assert "nvidia.com/gpu: 4" in page
    assert "Ready: True KubeletReady ok" in page
    assert "{&quot;type&quot;: &quot;kwok&quot;" not in page
    assert '{"type": "kwok"' not in page
