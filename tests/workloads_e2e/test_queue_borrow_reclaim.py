"""Borrow, then reclaim, against real Postgres and the real local cluster (kwok GPU nodes).

Project A (quota 2) runs a preemptible 4-GPU job on B's idle quota: the namespace ResourceQuota is
raised by the borrowed GPUs, so the API server accepts its pods. B submits; A's job gets a notice and,
after the notice period (2 s here), is preempted: the Kubernetes Job is suspended again and its pods
go. When B's job has finished, A's job is admitted again and runs. Admission and the reconciles are
called inline (no worker).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from accounts.models import Quota
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import drop_namespaces, wait_for
from tests.workloads_e2e.test_queue_cluster import _gpu_pod
from workloads.admission.cycle import admission_cycle
from workloads.admission.live import live_cluster, node_states
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.models import Job, QueueSettings
from workloads.queue import NodeState
from workloads.services import jobs as services
from workloads.services.cluster_sync import namespace_reconcile
from workloads.tasks import reconcile_job
from workloads.tests.conftest import IMAGE

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
SPEC: dict[str, Any] = {"image": IMAGE, "cpu_millicores": 100, "memory_mib": 64}


def _pods(kube: RealKubeClient, job: Job) -> list[dict[str, Any]]:
    body = kube.get(paths.pods(job.namespace), {"labelSelector": f"gpuportal.dev/job-uid={job.uid}"})
    return [p for p in (body or {}).get("items") or [] if not p["metadata"].get("deletionTimestamp")]


def _step(*jobs: Job) -> None:
    admission_cycle()
    for job in jobs:
        reconcile_job(job.pk)
        job.refresh_from_db()


def _leave_one_node_with_4_free(kube: RealKubeClient, ns: str) -> str:
    def one_free() -> tuple[NodeState, ...] | None:  # earlier tests' pods may still be going
        states = node_states(live_cluster(kube), reserved={}, slices_per_gpu=4)
        return states if any(n.schedulable and n.free_gpus >= 4 for n in states) else None

    states = wait_for(one_free, 180, "a node with 4 free GPUs")
    keep = max((n for n in states if n.schedulable), key=lambda n: n.free_gpus).name
    for n in states:
        extra = n.free_gpus - (4 if n.name == keep else 0)
        if extra > 0:
            kube.create(paths.pods(ns), _gpu_pod(f"fill-{n.name}", extra, n.name))
    return keep


def test_borrow_then_reclaim_then_resume(cluster_world: World, kube: RealKubeClient) -> None:
    world = cluster_world
    a, b = world.alpha, world.beta
    QueueSettings.objects.update_or_create(
        pk=1, defaults={"preemption_notice_s": 2, "borrowing_enabled": True}
    )
    Quota.objects.filter(project=a).update(gpus=4)  # the spec limit is the quota: submit first, then lower it
    borrower = services.job_submit(
        actor=world.member,
        project=a,
        data={**SPEC, "gpus": 4, "preemptible": True, "simulate": {"run_seconds": 900}},
    )
    Quota.objects.filter(project__in=[a, b]).update(gpus=2)
    for project in (a, b):
        namespace_reconcile(project_id=project.pk, client=kube)
    fill_ns = f"fill-{uuid.uuid4().hex[:6]}"
    kube.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fill_ns}}
    )
    try:
        node = _leave_one_node_with_4_free(kube, fill_ns)

        def running(job: Job) -> Job | None:
            _step(job)
            return job if job.state == JobState.RUNNING else None

        wait_for(lambda: running(borrower), 120, "the borrowing job running", every=1.0)
        assert borrower.borrowing
        assert borrower.node == node
        rq = kube.get(paths.resource_quota(a.namespace, "portal-quota")) or {}
        assert rq["spec"]["hard"]["requests.nvidia.com/gpu"] == "6"  # 2 quota + 4 borrowed

        lender = services.job_submit(
            actor=world.outsider, project=b, data={**SPEC, "gpus": 2, "simulate": {"run_seconds": 5}}
        )
        _step(borrower, lender)
        assert lender.state == JobState.QUEUED
        assert borrower.preempt_deadline is not None, "the borrower got a notice"
        assert lender.queue_explanation["code"] == "reclaiming"

        def preempted() -> bool:
            _step(borrower, lender)
            manifest = kube.get(paths.job(borrower.namespace, borrower.k8s_name)) or {}
            return bool(
                borrower.state in (JobState.PREEMPTED, JobState.QUEUED)
                and manifest["spec"].get("suspend") is True
                and not _pods(kube, borrower)
            )

        wait_for(preempted, 90, "the borrower re-suspended, its pods gone", every=1.0)
        states = list(borrower.events.exclude(to_state="").values_list("to_state", flat=True))
        assert "preempted" in states

        def lender_done() -> bool:
            _step(borrower, lender)
            return lender.state == JobState.SUCCEEDED

        wait_for(lender_done, 120, "the lender's job to run and finish", every=1.0)
        assert lender.node == node
        wait_for(lambda: running(borrower), 120, "the borrower running again", every=1.0)
        manifest = kube.get(paths.job(borrower.namespace, borrower.k8s_name)) or {}
        assert manifest["spec"]["suspend"] is False
        assert _pods(kube, borrower)
        states = list(borrower.events.exclude(to_state="").values_list("to_state", flat=True))
        assert states[-4:] == ["preempted", "queued", "admitted", "running"]
    finally:
        drop_namespaces(kube, (fill_ns, a.namespace, b.namespace))
