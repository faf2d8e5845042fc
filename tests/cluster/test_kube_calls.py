"""The local cluster's calls by path (deploy/localcluster/kube.py) against the real API server."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client

from deploy.localcluster import ClusterHandle, kube

pytestmark = pytest.mark.cluster


def _config_map(name: str) -> kube.JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


def test_create_and_delete_are_idempotent_and_errors_carry_the_status(
    kube_api: client.ApiClient, k8s_namespace: str
) -> None:
    base = f"/api/v1/namespaces/{k8s_namespace}/configmaps"
    assert kube.create(kube_api, base, _config_map("one")) is True
    assert kube.create(kube_api, base, _config_map("one")) is False
    assert kube.get(kube_api, f"{base}/one")["data"] == {"k": "v"}
    assert kube.delete(kube_api, f"{base}/one") is True
    assert kube.delete(kube_api, f"{base}/one") is False
    with pytest.raises(client.ApiException) as refused:
        kube.get(kube_api, f"{base}/one")
    assert refused.value.status == 404


def test_threads_share_one_client_on_kept_connections(
    k8s_cluster: ClusterHandle, k8s_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As many threads as the widest fan-out: each request finds a pooled connection, none is dropped."""
    base = f"/api/v1/namespaces/{k8s_namespace}/configmaps"
    names = [f"cm-{i}" for i in range(200)]
    caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
    with k8s_cluster.api() as api, ThreadPoolExecutor(50) as pool:
        created = list(pool.map(lambda n: kube.create(api, base, _config_map(n)), names))
        listed = kube.get(api, base)["items"]
    assert all(created)
    assert {item["metadata"]["name"] for item in listed} >= set(names)
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]
