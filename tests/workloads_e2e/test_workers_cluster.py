"""Jobs of several workers against real Postgres and the local cluster (kwok GPU nodes, the real Job
controller and scheduler): a 4-worker x 4-GPU job on a cluster with 3 free nodes waits with the numbers
and binds nothing; when a fourth node frees, all 4 workers bind in one cycle, each on its planned
node; a worker failed by hand fails the job and leaves no pod running, or, with a restart left, starts
every worker again on new pods."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from accounts.models import Quota
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import own_gpu_nodes, wait_for
from tests.workloads_e2e.test_queue_cluster import _gpu_pod
from workloads.admission.cycle import admission_cycle
from workloads.admission.live import live_cluster, node_states
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.builders import SIM_DELAY, SIM_EXIT_CODE
from workloads.k8s.client import RealKubeClient
from workloads.k8s.labels import UID_LABEL, WORKER_INDEX_LABEL
from workloads.models import Job, QueueSettings
from workloads.services import jobs as services
from workloads.tasks import reconcile_job, reconcile_namespace
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db(transaction=True)
SPEC = {
    "image": IMAGE,
    "workers": 4,
    "gpus": 4,
    "gpu_type": "Gang-4x4",
    "cpu_millicores": 100,
    "memory_mib": 64,
    "simulate": {"run_seconds": 900},
}


def job_pods(kube: RealKubeClient, job: Job) -> list[dict[str, Any]]:
    query = {"labelSelector": f"{UID_LABEL}={job.uid}"}
    return list((kube.get(paths.pods(job.namespace), query) or {}).get("items") or [])


def running(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")]


def test_a_job_of_four_workers_starts_all_or_nothing_and_fails_as_one(
    cluster_world: World, kube: RealKubeClient
) -> None:
    world = cluster_world
    Quota.objects.filter(project=world.alpha).update(gpus=16, cpu_millicores=64000, memory_mib=65536)
    reconcile_namespace(world.alpha.pk)
    fill = f"fill-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fill}})
    with own_gpu_nodes(kube, 4, "Gang-4x4") as nodes:
        try:
            # One of the four nodes full: 3 have room.
            kube.create(paths.pods(fill), _gpu_pod(f"fill-{nodes[3]}", 4, nodes[3]))
            big = services.job_submit(actor=world.member, project=world.alpha, data=SPEC)
            wait_for(lambda: _free(kube, nodes[3]) == 0, 60, "the fourth node full")
            reconcile_job(big.pk)
            assert admission_cycle() == []
            big.refresh_from_db()
            assert big.state == JobState.QUEUED
            assert big.queue_explanation["numbers"] == {"need": 4, "workers": 4, "fit": 3, "nodes": 3}
            assert "room for 3 now, on 3 nodes" in big.queue_explanation["sentence"]
            reconcile_job(big.pk)
            assert job_pods(kube, big) == [], "a worker of a job that cannot start as a whole exists"

            kube.delete(f"{paths.pods(fill)}/fill-{nodes[3]}")
            wait_for(lambda: _free(kube, nodes[3]) == 4, 120, "the fourth node free")
            assert admission_cycle() == [big.pk]
            big.refresh_from_db()
            assert sorted(big.planned_nodes) == sorted(nodes)

            def all_bound() -> list[dict[str, Any]] | None:
                reconcile_job(big.pk)  # the controller's pod watch would call it; here the test does
                pods = running(job_pods(kube, big))
                return pods if len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods) else None

            pods = wait_for(all_bound, 120, "all 4 workers bound")
            for pod in pods:
                index = int(pod["metadata"]["labels"][WORKER_INDEX_LABEL])
                assert pod["spec"]["nodeName"] == big.planned_nodes[index]
            service = kube.get(f"{paths.services(big.namespace)}/{big.k8s_name}")
            assert service is not None
            assert service["spec"]["clusterIP"] == "None"

            victim = sorted(p["metadata"]["name"] for p in pods)[1]
            fail = {"metadata": {"annotations": {SIM_EXIT_CODE: "1", SIM_DELAY: "1s"}}}
            kube.patch(f"{paths.pods(big.namespace)}/{victim}", fail)

            def failed() -> bool:
                reconcile_job(big.pk)
                big.refresh_from_db()
                return big.state == JobState.FAILED and not running(job_pods(kube, big))

            wait_for(failed, 120, "the job failed as one, no worker left running")
        finally:
            kube.delete(paths.namespace(fill))


def _free(kube: RealKubeClient, node: str) -> int | None:
    states = node_states(live_cluster(kube), reserved={}, slices_per_gpu=4)
    return next((n.free_gpus for n in states if n.name == node), None)


def test_with_a_restart_left_a_failed_worker_starts_every_worker_again(
    cluster_world: World, kube: RealKubeClient
) -> None:
    world = cluster_world
    QueueSettings.objects.update_or_create(pk=1, defaults={"workers_restarts": 1})
    with own_gpu_nodes(kube, 2, "Gang-restart"):
        _restart_then_fail(world, kube)


def _restart_then_fail(world: World, kube: RealKubeClient) -> None:
    spec = {**SPEC, "workers": 2, "gpus": 1, "gpu_type": "Gang-restart"}
    job = services.job_submit(actor=world.member, project=world.alpha, data=spec)

    def bound() -> list[dict[str, Any]] | None:
        admission_cycle()
        reconcile_job(job.pk)
        pods = running(job_pods(kube, job))
        return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None

    def fail_one(pods: list[dict[str, Any]]) -> None:
        fail = {"metadata": {"annotations": {SIM_EXIT_CODE: "1", SIM_DELAY: "1s"}}}
        kube.patch(f"{paths.pods(job.namespace)}/{pods[0]['metadata']['name']}", fail)

    first = wait_for(bound, 120, "both workers bound")
    fail_one(first)

    def restarted() -> list[dict[str, Any]] | None:
        pods = bound()
        fresh = pods and not {p["metadata"]["uid"] for p in pods} & {p["metadata"]["uid"] for p in first}
        return pods if fresh else None

    second = wait_for(restarted, 180, "both workers started again, on new pods")
    job.refresh_from_db()
    assert job.restarts == 1
    assert job.events.filter(to_state=JobState.PREEMPTED, reason__contains="workers start again").exists()
    fail_one(second)

    def failed() -> bool:
        reconcile_job(job.pk)
        job.refresh_from_db()
        return job.state == JobState.FAILED and not running(job_pods(kube, job))

    wait_for(failed, 120, "the job failed once no restart was left")
    assert (job.restarts, job.exit_code) == (1, 1)
