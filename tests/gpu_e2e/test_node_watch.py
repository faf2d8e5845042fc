"""The Node watch against the real control plane: add, relabel, cordon, delete show up in the models."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db import connection

from gpu.models import Node
from tests.gpu_e2e.helpers import eventually, new_node
from workloads.controller.watches import node_watch_spec
from workloads.k8s.client import RealKubeClient
from workloads.k8s.watch import Watcher

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def watching(kube: RealKubeClient) -> Iterator[Watcher]:
    # A short server-side timeout: the stream ends (and resumes) often, so stopping takes seconds.
    watcher = Watcher(client=kube, spec=node_watch_spec(), watch_timeout_s=3)
    stop = threading.Event()

    def run() -> None:
        try:
            watcher.run(stop)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="node-watch-test", daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(timeout=40)


def _node(name: str) -> Node | None:
    return Node.objects.filter(name=name).first()


def test_a_node_added_relabelled_cordoned_and_deleted_is_mirrored(
    kube: RealKubeClient, watching: Watcher
) -> None:
    name, manifest = new_node()
    kube.create("/api/v1/nodes", manifest)
    try:
        node = eventually(lambda: _node(name), what="the new node in the models")
        assert node.gpu_model == "NVIDIA-GeForce-RTX-5090"
        assert node.gpu_count == 4
        kube.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {"gpu-portal.io/pool": "batch"}}})
        eventually(lambda: (n := _node(name)) and n.labels.get("gpu-portal.io/pool") == "batch", what="label")
        kube.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": True}})
        eventually(lambda: (n := _node(name)) and n.cordoned, what="cordon")
    finally:
        kube.delete(f"/api/v1/nodes/{name}")
    eventually(lambda: (n := _node(name)) and n.deleted, what="deletion")


def test_a_relist_marks_nodes_the_cluster_no_longer_has(kube: RealKubeClient) -> None:
    Node.objects.create(name="gpu-e2e-ghost")
    watcher = Watcher(client=kube, spec=node_watch_spec())
    watcher.relist()
    assert Node.objects.get(name="gpu-e2e-ghost").deleted
    assert Node.objects.filter(deleted=False).exists()  # the cluster's own nodes were mirrored
