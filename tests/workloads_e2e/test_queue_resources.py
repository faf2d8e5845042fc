"""CPU headroom against the real local cluster: a job that fits the GPU quota but not the project's
CPU stays queued with the numbers, rather than being admitted, un-suspended and then refused by the
namespace ResourceQuota, holding its GPUs while "admitted". And the ResourceQuota's bound on
the number of Kubernetes Jobs."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import override_settings

from accounts.models import Quota
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import wait_for
from tests.workloads_e2e.test_queue_cluster import _gpu_pod
from workloads.admission.cycle import admission_cycle
from workloads.admission.live import live_cluster, node_states
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.k8s.errors import K8sError
from workloads.models import Job, ReconcileOutbox
from workloads.services import jobs as services
from workloads.tasks import reconcile_job, reconcile_namespace
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db(transaction=True)
SPEC = {"image": IMAGE, "gpus": 1, "memory_mib": 64, "simulate": {"run_seconds": 900}}


def _quota_used(kube: RealKubeClient, namespace: str) -> dict[str, Any]:
    rq = kube.get(paths.resource_quota(namespace, "portal-quota")) or {}
    return dict((rq.get("status") or {}).get("used") or {})


def test_a_job_over_the_cpu_headroom_waits_instead_of_being_refused(
    cluster_world: World, kube: RealKubeClient
) -> None:
    world = cluster_world
    Quota.objects.filter(project=world.alpha).update(gpus=4, cpu_millicores=2000)
    reconcile_namespace(world.alpha.pk)
    ns = world.alpha.namespace

    def room() -> bool:  # earlier tests' pods may still be going
        states = node_states(live_cluster(kube), reserved={}, slices_per_gpu=4)
        assert all(n.free_cpu_millicores is not None for n in states)  # real nodes advertise CPU
        return any(n.schedulable and n.free_gpus >= 2 for n in states)

    wait_for(room, 120, "a node with 2 free GPUs")
    try:
        first = services.job_submit(
            actor=world.member, project=world.alpha, data={**SPEC, "cpu_millicores": 1500}
        )
        second = services.job_submit(
            actor=world.member, project=world.alpha, data={**SPEC, "cpu_millicores": 1000}
        )
        assert admission_cycle() == [first.pk]
        reconcile_job(first.pk)
        wait_for(lambda: _quota_used(kube, ns).get("requests.cpu") == "1500m", 120, "1500m CPU in use")
        assert admission_cycle() == []
        second.refresh_from_db()
        assert second.state == JobState.QUEUED
        assert second.queue_explanation["code"] == "quota_cpu"
        assert (
            second.queue_explanation["sentence"]
            == "waiting for CPU: needs 1000m, 500m of 2000m free in alpha"
        )
        # What admitting it would have met: the API server refuses a 1000m pod in this namespace.
        pod = _gpu_pod(f"probe-{uuid.uuid4().hex[:6]}", 1)
        for part in ("requests", "limits"):
            pod["spec"]["containers"][0]["resources"][part]["cpu"] = "1000m"
        with pytest.raises(K8sError, match="exceeded quota"):
            kube.create(paths.pods(ns), pod)
        assert Job.objects.get(pk=second.pk).state == JobState.QUEUED
    finally:
        kube.delete(paths.namespace(ns))  # free the nodes for the next test


def _hard(kube: RealKubeClient, namespace: str) -> dict[str, Any]:
    rq = kube.get(paths.resource_quota(namespace, "portal-quota")) or {}
    return dict((rq.get("spec") or {}).get("hard") or {})


def test_the_namespace_holds_at_most_its_count_of_jobs(cluster_world: World, kube: RealKubeClient) -> None:
    """`count/jobs.batch` bounds what one project puts in etcd; the API server's refusal makes nothing
    and loses nothing: the job stays queued with its request kept, and is made once there is room."""
    world = cluster_world
    ns = world.alpha.namespace
    try:
        with override_settings(GPUPORTAL_NAMESPACE_MAX_JOBS=2):
            reconcile_namespace(world.alpha.pk)
            wait_for(lambda: "count/jobs.batch" in _quota_used(kube, ns), 60, "the quota's job count")
            assert _hard(kube, ns)["count/jobs.batch"] == "2"
            jobs = [services.job_submit(actor=world.member, project=world.alpha, data=SPEC) for _ in range(3)]
            reconcile_job(jobs[0].pk)
            reconcile_job(jobs[1].pk)
            with pytest.raises(K8sError, match="exceeded quota"):
                reconcile_job(jobs[2].pk)
        listed = kube.get(paths.jobs(ns)) or {}
        assert len(listed.get("items") or []) == 2
        third = Job.objects.get(pk=jobs[2].pk)
        assert (third.state, third.created_in_cluster_at) == (JobState.QUEUED, None)
        assert ReconcileOutbox.objects.filter(job_id=third.pk).exists()  # the intent is kept
        reconcile_namespace(world.alpha.pk)  # the default limit again
        # The API server keeps quantities in canonical form: 10000 is stored as "10k".
        wait_for(lambda: _hard(kube, ns).get("count/jobs.batch") == "10k", 60, "the default job count")
        reconcile_job(third.pk)
        assert Job.objects.get(pk=third.pk).created_in_cluster_at is not None
    finally:
        kube.delete(paths.namespace(ns))  # free the nodes for the next test
