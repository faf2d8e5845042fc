"""MPS tenancy against real Postgres and the real local cluster: one project per shared GPU.

Two projects' MPS jobs, each with its suspended Kubernetes Job made at submission: the first is
admitted to a node; before its pod exists the queue already counts that node's shared GPUs as the
first project's and puts the second project's job elsewhere. Unsuspending pins each Job to its node
(the API server accepts the affinity on the suspended Job, the scheduler binds the pod there), the
queue then sees the bound pod as the node's tenant, and each pod runs as its project's own UID and
GID under the namespace's "restricted" Pod Security.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings

from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import drop_namespaces, wait_for
from workloads.admission.cycle import admission_cycle
from workloads.admission.live import live_cluster, node_states
from workloads.choices import JobState
from workloads.k8s import builders, paths
from workloads.k8s.client import RealKubeClient
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tasks import reconcile_job, reconcile_namespace
from workloads.tests.conftest import IMAGE

pytestmark = pytest.mark.django_db(transaction=True)
MPS = {
    "image": IMAGE,
    "gpus": 0,
    "mps_slices": 1,
    "cpu_millicores": 100,
    "memory_mib": 64,
    "simulate": {"run_seconds": 900},
}


def _bound_pod(kube: RealKubeClient, job: Job) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def bound() -> bool:
        body = kube.get(paths.pods(job.namespace), {"labelSelector": f"{builders.UID_LABEL}={job.uid}"})
        found[:] = [p for p in (body or {}).get("items") or [] if (p.get("spec") or {}).get("nodeName")]
        return bool(found)

    wait_for(bound, 120, f"the pod of job {job.pk} bound to a node")
    return found[0]


def _submit_and_admit(world: World, project: Any, actor: Any) -> Job:
    job = services.job_submit(actor=actor, project=project, data=MPS)
    reconcile_job(job.pk)  # the suspended Job, as the outbox makes it at submission
    admission_cycle()
    job.refresh_from_db()
    assert job.state == JobState.ADMITTED, job.queue_explanation
    return job


def test_two_projects_mps_jobs_never_share_a_node_and_run_as_their_own_uid(
    cluster_world: World, kube: RealKubeClient
) -> None:
    world = cluster_world
    for project in (world.alpha, world.beta):
        reconcile_namespace(project.pk)
    try:
        a = _submit_and_admit(world, world.alpha, world.member)
        b = _submit_and_admit(world, world.beta, world.outsider)  # a's pod is not there yet
        assert b.planned_node != a.planned_node
        for job in (a, b):
            reconcile_job(job.pk)  # unsuspend, pinned
        pod_a, pod_b = _bound_pod(kube, a), _bound_pod(kube, b)
        assert (pod_a["spec"]["nodeName"], pod_b["spec"]["nodeName"]) == (a.planned_node, b.planned_node)
        cluster_job = kube.get(paths.job(a.namespace, a.k8s_name)) or {}
        assert cluster_job["spec"]["template"]["spec"]["affinity"] == builders.pod_affinity(
            a.job_spec(), builders.job_identity(a)
        )

        states = node_states(live_cluster(kube), reserved={}, slices_per_gpu=4)
        held = {n.name: dict(n.slice_tenants) for n in states}
        assert held[a.planned_node] == {world.alpha.slug: 1}
        assert held[b.planned_node] == {world.beta.slug: 1}

        base = settings.GPUPORTAL_PROJECT_UID_BASE
        for pod, project in ((pod_a, world.alpha), (pod_b, world.beta)):
            ctx = pod["spec"]["securityContext"]
            assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["fsGroup"]) == (base + project.pk,) * 3
    finally:
        drop_namespaces(kube, (world.alpha.namespace, world.beta.namespace))
