"""The controller's watch-fed copy of nodes and live pods: the store, when it is trusted, and that
the admission cycle then reads no list from the API server. The real cluster's side is
tests/workloads_e2e/test_cluster_cache_live.py."""

from __future__ import annotations

from typing import Any

import pytest

from plugin.names import GPU_RESOURCE, SHARED_RESOURCE
from tests.fixtures.personas import World
from workloads.admission.live import LiveCluster, node_states, pod_projection
from workloads.choices import JobState
from workloads.controller import loop
from workloads.k8s.labels import PROJECT_LABEL, UID_LABEL
from workloads.k8s.store import Store
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE
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
    next(w for w in controller.watchers if w.spec.name == "pods-all").distrust()  # its stream failed
    assert controller.cache.live() is None


def test_a_tick_places_a_job_from_the_copy_with_no_list(
    jobs_world: World, fake_kube: FakeKube, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(loop, "outbox_dispatch", lambda: None)  # no broker here; the pass is under test
    fake_kube.nodes = [fake_node("n0"), fake_node("n1")]
    fake_kube.objects["/api/v1/namespaces/other/pods/full"] = _pod("full", "n0", 4)  # not the portal's
    controller = loop.Controller(client=fake_kube, identity="test")
    _listed(controller)
    job = services.job_submit(
        actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE, "gpus": 4}
    )
    fake_kube.calls.clear()
    controller.tick()
    assert "controller tick failed" not in caplog.text
    assert ("GET", "/api/v1/pods") not in fake_kube.calls
    assert ("GET", "/api/v1/nodes") not in fake_kube.calls
    job.refresh_from_db()
    assert (job.state, job.planned_node) == (JobState.ADMITTED, "n1")  # n0 is full in the copy
    next(w for w in controller.watchers if w.spec.name == "nodes").distrust()
    controller.tick()
    assert ("GET", "/api/v1/pods") in fake_kube.calls  # not trusted: the pass lists, as before


def _rich(name: str, node: str, requests: dict[str, str], phase: str = "Running") -> dict[str, Any]:
    pod = _pod(name, node, 0, phase)
    pod["metadata"]["labels"] = {UID_LABEL: f"uid-{name}", PROJECT_LABEL: "alpha", "app": "x"}
    pod["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    container = pod["spec"]["containers"][0]
    container["resources"] = {"requests": requests, "limits": requests}
    container["env"] = [{"name": "A", "value": "1"}]
    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return pod


def test_the_projection_keeps_all_admission_reads() -> None:
    shared = {SHARED_RESOURCE: "2", "cpu": "1500m", "memory": "3Gi"}
    pods = [
        _rich("whole", "n0", {GPU_RESOURCE: "2", "cpu": "2", "memory": "8Gi"}),
        _rich("slices", "n1", shared),
        _rich("pending", "", {GPU_RESOURCE: "1"}, phase="Pending"),  # not bound yet
        _pod("foreign", "n1", 1),  # no portal labels: its namespace is its tenant
    ]
    nodes = [fake_node("n0"), fake_node("n1")]
    for node in nodes:
        node["status"]["allocatable"].update({"cpu": "64", "memory": "512Gi"})
    raw, projected = LiveCluster(nodes, pods), LiveCluster(nodes, [pod_projection(p) for p in pods])
    assert node_states(projected, reserved={}, slices_per_gpu=4) == node_states(
        raw, reserved={}, slices_per_gpu=4
    )
    assert projected.job_uids() == raw.job_uids() == {"uid-whole", "uid-slices", "uid-pending"}
    assert projected.bound_job_uids() == raw.bound_job_uids() == {"uid-whole", "uid-slices"}
    assert "managedFields" not in projected.pods[0]["metadata"]
