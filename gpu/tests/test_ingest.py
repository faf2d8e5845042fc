"""The ingest endpoint against the real Postgres: auth, validation, idempotence, health events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from gpu.choices import GpuEventKind, GpuHealth, SharingMode
from gpu.models import Gpu, GpuEvent, GpuSample
from gpu.services import node_token_revoke
from gpu.tests.factories import batch, make_gpus, make_node, node_token, sample, series
from plugin.names import GPU_COUNT_LABEL, GPU_RESOURCE, SHARED_RESOURCE
from tests.fixtures.personas import World, api_client

URL = "/api/v1/ingest/samples"
pytestmark = pytest.mark.django_db(transaction=True)


def post(secret: str | None, body: Any) -> Any:
    client = APIClient()
    if secret:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client.post(URL, body, format="json")


def test_it_stores_a_batch_and_answers_counts() -> None:
    node = make_node()
    gpus = make_gpus(node, 2)
    body = batch(node.name, series(gpus[0].uuid, 30) + series(gpus[1].uuid, 30))
    response = post(node_token(node), body)
    assert response.status_code == 200, response.content
    assert response.json() == {"accepted": 60, "duplicates": 0}
    assert GpuSample.objects.filter(gpu_id=gpus[0].pk).count() == 30


@pytest.mark.parametrize("retried", [False, True], ids=["copy", "merge of a retried batch"])
def test_every_value_is_stored_as_sent(retried: bool) -> None:
    """Binary COPY (gpu/storage.py): each column keeps its value and type, processes a JSON array."""
    node = make_node()
    (gpu,) = make_gpus(node, 1)
    ts = datetime.now(UTC).replace(microsecond=123000) - timedelta(minutes=1)
    sent = sample(gpu.uuid, ts, util=77, namespace="gp-alpha", pod="job-y-0", xid=79, ecc_sbe=1 << 40)
    secret = node_token(node)
    if retried:  # the second batch meets the key and goes through the temp table's merge
        post(secret, batch(node.name, [sample(gpu.uuid, ts - timedelta(seconds=1))]))
        body = batch(node.name, [sample(gpu.uuid, ts - timedelta(seconds=1)), sent])
        assert post(secret, body).json() == {"accepted": 1, "duplicates": 1}
    else:
        assert post(secret, batch(node.name, [sent])).json() == {"accepted": 1, "duplicates": 0}
    stored = GpuSample.objects.get(gpu_id=gpu.pk, ts=ts)
    got = {field: getattr(stored, field) for field in sent if field not in ("gpu_uuid", "ts")}
    assert got == {field: sent[field] for field in got}
    assert stored.ts == ts
    assert stored.processes == sent["processes"]
    assert stored.processes[0]["pod_name"] == "job-y-0"


def test_duplicates_are_ignored_and_counted() -> None:
    node = make_node()
    (gpu,) = make_gpus(node, 1)
    samples = series(gpu.uuid, 10)
    secret = node_token(node)
    assert post(secret, batch(node.name, samples)).json() == {"accepted": 10, "duplicates": 0}
    again = post(secret, batch(node.name, samples[5:] + series(gpu.uuid, 3, start=datetime.now(UTC))))
    assert again.json() == {"accepted": 3, "duplicates": 5}
    assert GpuSample.objects.filter(gpu_id=gpu.pk).count() == 13


def test_a_token_of_another_node_is_refused() -> None:
    node_a, node_b = make_node("gpu-node-a"), make_node("gpu-node-b")
    make_gpus(node_b, 1)
    response = post(node_token(node_a), batch(node_b.name, series("GPU-gpu-node-b-0", 2)))
    assert response.status_code == 403
    assert GpuSample.objects.count() == 0


def test_a_token_cannot_write_another_nodes_gpu_under_its_own_name() -> None:
    node_a, node_b = make_node("gpu-node-a"), make_node("gpu-node-b")
    (foreign,) = make_gpus(node_b, 1)
    response = post(node_token(node_a), batch(node_a.name, series(foreign.uuid, 2)))
    assert response.status_code == 403
    assert GpuSample.objects.count() == 0


@pytest.mark.parametrize("secret", [None, "gpn_nothing_real", "gpt_personal"])
def test_missing_or_unknown_tokens_are_401(secret: str | None) -> None:
    node = make_node()
    assert post(secret, batch(node.name, series("GPU-x", 1))).status_code == 401


def test_a_revoked_token_is_401() -> None:
    node = make_node()
    secret = node_token(node)
    node_token_revoke(token=node.tokens.get(), actor=None)
    assert post(secret, batch(node.name, series("GPU-x", 1))).status_code == 401


def test_a_personal_api_token_cannot_ingest(world: World) -> None:
    node = make_node()
    client = api_client(world.admin)
    assert client.post(URL, batch(node.name, series("GPU-x", 1)), format="json").status_code == 401


BAD = [
    ({"util_gpu": 101}, "samples[1].util_gpu"),
    ({"util_gpu": "50"}, "samples[1].util_gpu"),
    ({"temp_c": float("nan")}, None),  # not even JSON: rejected as a body error
    ({"ts": "2026-11-30 12:00:00"}, "samples[1].ts"),
    ({"ts": "2026-11-30T12:00:00.000+02:00"}, "samples[1].ts"),
    ({"ts": "1999-01-01T00:00:00.000Z"}, "samples[1].ts"),
    ({"ts": "2099-01-01T00:00:00.000Z"}, "samples[1].ts"),  # beyond now + the allowed clock skew
    ({"gpu_uuid": ""}, "samples[1].gpu_uuid"),
    ({"processes": [{"pid": "x", "mem_used_mib": 1}]}, "samples[1].processes[0].pid"),
    ({"xid": 1.5}, "samples[1].xid"),
    ({"xid": 1 << 31}, "samples[1].xid"),  # beyond the integer column: a 400, not a failed COPY
    ({"mem_used_mib": 1 << 31}, "samples[1].mem_used_mib"),
]


@pytest.mark.parametrize(("override", "field"), BAD)
def test_a_bad_sample_refuses_the_whole_batch(override: dict[str, Any], field: str | None) -> None:
    node = make_node()
    (gpu,) = make_gpus(node, 1)
    good, bad = series(gpu.uuid, 2)
    bad.update(override)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {node_token(node)}")
    import json

    try:
        raw = json.dumps(batch(node.name, [good, bad]), allow_nan=False)
    except ValueError:
        raw = json.dumps(batch(node.name, [good, bad]))  # NaN literal: invalid JSON for the portal
    response = client.post(URL, raw, content_type="application/json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    if field:
        assert field in error["fields"]
    assert GpuSample.objects.count() == 0


def test_an_oversized_batch_is_refused() -> None:
    node = make_node()
    response = post(node_token(node), batch(node.name, series("GPU-x", 5001)))
    assert response.status_code == 400
    assert "samples" in response.json()["error"]["fields"]


def test_unknown_gpus_of_the_node_are_registered_in_order() -> None:
    node = make_node()
    ts = datetime.now(UTC)
    body = batch(node.name, [sample("GPU-b", ts), sample("GPU-a", ts)])
    assert post(node_token(node), body).status_code == 200
    assert list(Gpu.objects.filter(node=node).values_list("uuid", "index")) == [("GPU-b", 0), ("GPU-a", 1)]


def test_xid_and_ecc_become_events_and_health() -> None:
    node = make_node()
    a, b, c = make_gpus(node, 3)
    ts = datetime.now(UTC) - timedelta(seconds=5)
    body = batch(
        node.name,
        [
            sample(a.uuid, ts, xid=79),
            sample(b.uuid, ts, xid=13),
            sample(c.uuid, ts, ecc_sbe=2),
        ],
    )
    secret = node_token(node)
    assert post(secret, body).status_code == 200
    assert post(secret, body).json()["duplicates"] == 3  # a retry makes no second event
    for gpu in (a, b, c):
        gpu.refresh_from_db()
    assert (a.health, b.health, c.health) == (GpuHealth.UNHEALTHY, GpuHealth.HEALTHY, GpuHealth.DEGRADED)
    assert GpuEvent.objects.filter(kind=GpuEventKind.XID).count() == 2
    assert GpuEvent.objects.filter(kind=GpuEventKind.ECC_SBE, gpu=c).get().value == 2
    assert a.last_seen is not None


def _uuids(n: int) -> list[str]:
    return [f"GPU-new-{i}" for i in range(n)]


def test_a_node_cannot_report_more_gpus_than_kubernetes_gives_it() -> None:
    node = make_node(gpus=2)
    ts = datetime.now(UTC)
    refused = post(node_token(node), batch(node.name, [sample(u, ts) for u in _uuids(3)]))
    assert refused.status_code == 403, refused.content
    assert "3 new GPU(s)" in refused.json()["error"]["message"]
    assert "of the 2 GPUs its Kubernetes capacity" in refused.json()["error"]["message"]
    assert not Gpu.objects.exists()
    assert GpuSample.objects.count() == 0
    assert post(node_token(node), batch(node.name, [sample(u, ts) for u in _uuids(2)])).status_code == 200


def test_the_limit_counts_the_gpus_already_known() -> None:
    node = make_node(gpus=2)
    make_gpus(node, 2)
    ts = datetime.now(UTC)
    assert post(node_token(node), batch(node.name, [sample("GPU-gpu-node-0-1", ts)])).status_code == 200
    assert post(node_token(node), batch(node.name, [sample("GPU-third", ts)])).status_code == 403
    assert Gpu.objects.count() == 2


def test_a_node_without_gpu_resources_registers_no_gpus() -> None:
    node = make_node(gpus=0)
    assert post(node_token(node), batch(node.name, series("GPU-x", 1))).status_code == 403
    assert not Gpu.objects.exists()


def test_shared_gpus_count_beside_the_whole_ones_the_plugin_still_advertises() -> None:
    # Two of four GPUs shared: the plugin advertises 2 whole GPUs and the others as MPS slices.
    node = make_node(gpus=4)
    gpus = make_gpus(node, 3)
    Gpu.objects.filter(pk__in=[gpus[0].pk, gpus[1].pk]).update(sharing_mode=SharingMode.SHARED, slices=4)
    node.capacity = node.allocatable = {GPU_RESOURCE: "2", SHARED_RESOURCE: "8"}
    node.save()
    ts = datetime.now(UTC)
    assert post(node_token(node), batch(node.name, [sample("GPU-fourth", ts)])).status_code == 200
    assert post(node_token(node), batch(node.name, [sample("GPU-fifth", ts)])).status_code == 403
    assert Gpu.objects.count() == 4


def test_the_gpu_feature_discovery_count_label_is_an_upper_bound_too() -> None:
    node = make_node(gpus=0)
    node.labels = {**node.labels, GPU_COUNT_LABEL: "2"}
    node.save()
    ts = datetime.now(UTC)
    assert post(node_token(node), batch(node.name, [sample(u, ts) for u in _uuids(2)])).status_code == 200
    assert post(node_token(node), batch(node.name, [sample("GPU-more", ts)])).status_code == 403
