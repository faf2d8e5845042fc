"""The admission queue against real Postgres and the real local cluster (kwok GPU nodes).

The quota race: 50 concurrent 1-GPU submits into an 8-GPU quota, two admission cycles racing; never more
than 8 GPUs admitted, the ledger equals the GPUs in use, a 9th GPU pod forced past the portal fails with
"exceeded quota" and the portal says the quota is full. Fragmentation: 4 free GPUs split 2 + 2 over two
nodes do not start a 4-GPU job, and the reason says so.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connections

from plugin.names import GPU_RESOURCE
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import wait_for
from workloads.admission.cycle import admission_cycle
from workloads.admission.live import live_cluster, node_states
from workloads.choices import ACTIVE_STATES, JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.k8s.errors import K8sError
from workloads.models import Job
from workloads.queue import NodeState
from workloads.selectors import quota_usage
from workloads.services import jobs as services
from workloads.tasks import reconcile_job, reconcile_namespace
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db(transaction=True)
SPEC = {"image": IMAGE, "gpus": 1, "cpu_millicores": 100, "memory_mib": 64, "simulate": {"run_seconds": 900}}


def _in_thread(fn: Any, errors: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    return threading.Thread(target=run)


def _gpu_pod(name: str, gpus: int, node: str = "") -> dict[str, Any]:
    res = {"nvidia.com/gpu": str(gpus), "cpu": "100m", "memory": "64Mi"}
    container = {
        "name": "x",
        "image": "busybox",
        "resources": {"requests": res, "limits": res},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    spec: dict[str, Any] = {"containers": [container]}
    if node:
        spec["nodeName"] = node
        spec["tolerations"] = [{"operator": "Exists"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_a_4_gpu_job_waits_on_two_half_free_nodes(cluster_world: World, kube: RealKubeClient) -> None:
    world = cluster_world
    ns = f"frag-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:

        def two_free() -> tuple[NodeState, ...] | None:  # earlier tests' pods may still be going
            states = node_states(live_cluster(kube), reserved={}, slices_per_gpu=4)
            ok = [n for n in states if n.schedulable and n.free_gpus >= 2]
            return states if len(ok) >= 2 else None

        states = wait_for(two_free, 120, "two nodes with 2 free GPUs")
        ready = [n for n in states if n.schedulable and n.free_gpus >= 2][:2]
        for n in states:
            keep = 2 if n in ready else 0
            if n.free_gpus > keep:
                kube.create(paths.pods(ns), _gpu_pod(f"fill-{n.name}", n.free_gpus - keep, n.name))
        big = services.job_submit(actor=world.member, project=world.alpha, data={**SPEC, "gpus": 4})
        assert admission_cycle() == []
        big.refresh_from_db()
        assert big.state == JobState.QUEUED
        assert big.queue_explanation["code"] == "no_node"
        assert "largest free block is 2" in big.queue_explanation["sentence"]
    finally:
        kube.delete(paths.namespace(ns))


def pod_gpus(kube: RealKubeClient, namespace: str) -> int:
    """GPUs requested by the namespace's pods that have not finished."""
    pods = (kube.get(paths.pods(namespace)) or {}).get("items") or []
    return sum(
        int((c.get("resources") or {}).get("requests", {}).get(GPU_RESOURCE, 0))
        for pod in pods
        if (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        for c in pod["spec"]["containers"]
    )


def test_concurrent_submits_never_exceed_the_quota(cluster_world: World, kube: RealKubeClient) -> None:
    world = cluster_world
    errors: list[BaseException] = []
    peaks: list[int] = []
    reconcile_namespace(world.alpha.pk)

    def room_for_the_quota() -> bool:  # earlier tests' pods (fill pods, cancelled jobs) may still be going
        states = node_states(live_cluster(kube), reserved={}, slices_per_gpu=4)
        return sum(n.free_gpus for n in states if n.schedulable) >= 8

    wait_for(room_for_the_quota, 120, "8 free GPUs in the cluster")

    def submits() -> None:
        for _ in range(25):
            services.job_submit(actor=world.member, project=world.alpha, data=SPEC)

    def admits() -> None:
        for _ in range(15):
            admission_cycle()
            peaks.append(quota_usage(project=world.alpha)["gpus"])

    threads = [_in_thread(f, errors) for f in (submits, submits, admits, admits)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    admission_cycle()
    active = Job.objects.filter(project=world.alpha, state__in=ACTIVE_STATES)
    assert max([*peaks, 0]) <= 8
    assert quota_usage(project=world.alpha)["gpus"] == 8
    assert Job.objects.filter(project=world.alpha).count() == 50
    for job in active:
        reconcile_job(job.pk)
    ns = world.alpha.namespace
    # The ledger against the cluster, not against its own SQL: the GPUs the namespace's pods request.
    wait_for(lambda: pod_gpus(kube, ns) == quota_usage(project=world.alpha)["gpus"], 120, "pods = ledger")

    def quota_used() -> bool:
        rq = kube.get(paths.resource_quota(ns, "portal-quota")) or {}
        return bool(((rq.get("status") or {}).get("used") or {}).get("requests.nvidia.com/gpu") == "8")

    wait_for(quota_used, 120, "8 GPUs in use in the namespace ResourceQuota")
    with pytest.raises(K8sError, match="exceeded quota"):
        kube.create(paths.pods(ns), _gpu_pod(f"intruder-{uuid.uuid4().hex[:6]}", 1))
    waiting = (
        Job.objects.filter(project=world.alpha, state=JobState.QUEUED).order_by("queue_position").first()
    )
    assert waiting is not None
    assert waiting.queue_explanation["code"] in ("quota", "behind_head")
    head = Job.objects.filter(project=world.alpha, state=JobState.QUEUED, queue_position__isnull=False)
    assert any("quota 8/8 GPUs" in j.queue_explanation["sentence"] for j in head)
    kube.delete(paths.namespace(ns))  # free the nodes for the next test
