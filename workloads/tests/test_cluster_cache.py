"""The controller's watch-fed copy of nodes and live pods: the store, when it is trusted, and that
the admission pass then reads no list from the API server. The real cluster's side is
tests/workloads_e2e/test_cluster_cache_live.py."""

from __future__ import annotations

from typing import Any

import pytest

from workloads.admission.live import live_cluster, node_states, pod_projection
from workloads.controller import loop
from workloads.k8s.store import Store
from workloads.tests.fakes import FakeKube, fake_node

pytestmark = pytest.mark.django_db(transaction=True)  # the node watch closes old connections


def _pod(name: str, node: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    res = {"nvidia.com/gpu": str(gpus), "cpu": "250m", "memory": "1Gi"}
    return {
        "metadata": {"name": name, "namespace": "team", "uid": f"u-{name}", "labels": {"a": "b"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": res}}],
        },
        "status": {"phase": phase, "podIP": "10.0.0.1"},
    }


def test_the_store_keeps_what_it_is_told_and_a_relist_replaces_it() -> None:
    store = Store(keep=lambda o: o["status"]["phase"] != "Succeeded")
    store.on_relist([_pod("a", "n0", 1), _pod("b", "n0", 1, "Succeeded")])
    assert store.synced
    assert [p["metadata"]["name"] for p in store.items()] == ["a"]
    store.on_event("ADDED", _pod("c", "n1", 2))
    store.on_event("MODIFIED", _pod("a", "n0", 1, "Succeeded"))  # ended: no longer kept
    assert [p["metadata"]["name"] for p in store.items()] == ["c"]
    store.on_event("DELETED", _pod("c", "n1", 2))
    store.on_event("ADDED", _pod("d", "n1", 2))
    store.on_relist([_pod("e", "n0", 1)])  # d was deleted while the stream was down
    assert [p["metadata"]["name"] for p in store.items()] == ["e"]


def _kube() -> FakeKube:
    kube = FakeKube()
    kube.nodes = [fake_node("n1"), fake_node("n0")]  # out of order, as a store may hold them
    for pod in (_pod("a", "n0", 1), _pod("b", "n1", 2), _pod("done", "n1", 2, "Succeeded")):
        kube.objects[f"/api/v1/namespaces/team/pods/{pod['metadata']['name']}"] = pod
    return kube


def _listed(controller: loop.Controller) -> None:
    for watcher in controller.watchers:
        if watcher.spec.name in ("nodes", "pods-all"):
            watcher.resource_version = watcher.relist()


def test_the_copy_is_trusted_only_once_both_streams_are_current() -> None:
    controller = loop.Controller(client=_kube(), identity="test")
    assert controller.cache.live() is None
    _listed(controller)
    live = controller.cache.live()
    assert live is not None
    assert [n["metadata"]["name"] for n in live.nodes] == ["n0", "n1"]  # as a LIST orders them
    assert sorted(p["metadata"]["name"] for p in live.pods) == ["a", "b"]  # the ended pod left out
    assert all(p == pod_projection(p) for p in live.pods)  # trimmed to what admission reads
    next(w for w in controller.watchers if w.spec.name == "pods-all").current = False  # its stream failed
    assert controller.cache.live() is None


def test_a_tick_admits_from_the_copy_with_no_list_and_as_a_list_would() -> None:
    kube = _kube()
    controller = loop.Controller(client=kube, identity="test")
    _listed(controller)
    live = controller.cache.live()
    assert live is not None
    listed = live_cluster(kube)
    assert node_states(live, reserved={}, slices_per_gpu=4) == node_states(
        listed, reserved={}, slices_per_gpu=4
    )
    kube.calls.clear()
    controller.tick()
    assert ("GET", "/api/v1/pods") not in kube.calls
    assert ("GET", "/api/v1/nodes") not in kube.calls
    next(w for w in controller.watchers if w.spec.name == "nodes").current = False
    controller.tick()
    assert ("GET", "/api/v1/pods") in kube.calls  # not trusted: the pass lists, as before
