"""Unknown and lost (docs/reliability.md: a job is failed only on evidence) against the real API
server, Job controller and kwok nodes.

The Kubernetes Job of a running job is deleted behind the portal's back: a pod left behind keeps it
running (evidence); with the pods gone too it is unknown, holds its quota, and is lost after the
(shortened) GPUPORTAL_JOB_UNKNOWN_SECONDS, which lets the queue admit the next job. When the Job
shows up again (a restored API server, say), the unknown job is running again.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from accounts.models import Quota
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import wait_for
from tests.workloads_e2e.test_job_lifecycle import drive, submit
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState
from workloads.k8s import builders, labels, paths
from workloads.k8s.client import RealKubeClient
from workloads.models import Job
from workloads.selectors import quota_usage
from workloads.services import jobs as services
from workloads.tasks import reconcile_job

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


def pods_of(kube: RealKubeClient, job: Job) -> list[dict[str, Any]]:
    body = kube.get(paths.pods(job.namespace), {"labelSelector": f"{labels.UID_LABEL}={job.uid}"})
    return list((body or {}).get("items") or [])


def delete_pods(kube: RealKubeClient, job: Job) -> None:
    """Delete the pods outright (a finalizer left on an orphan would keep it terminating)."""
    for pod in pods_of(kube, job):
        path = f"{paths.pods(job.namespace)}/{pod['metadata']['name']}"
        kube.patch(path, {"metadata": {"finalizers": None}})
        kube.delete(path)
    wait_for(lambda: not pods_of(kube, job), 60, "the pods gone", every=0.5)


def delete_job(kube: RealKubeClient, job: Job, propagation: str) -> None:
    path = paths.job(job.namespace, job.k8s_name)
    kube.delete(path, propagation=propagation)
    wait_for(lambda: kube.get(path) is None, 60, "the Kubernetes Job gone", every=0.5)


def transitions(job: Job) -> list[str]:
    return list(job.events.exclude(to_state="").values_list("to_state", flat=True))


@override_settings(GPUPORTAL_JOB_UNKNOWN_SECONDS=4)
def test_a_job_deleted_behind_the_portals_back_is_unknown_then_lost(
    cluster_world: World, kube: RealKubeClient
) -> None:
    Quota.objects.filter(project=cluster_world.alpha).update(gpus=1)
    job = drive(submit(cluster_world, simulate={"run_seconds": 600}), {JobState.RUNNING})
    waiting = submit(cluster_world, simulate={"run_seconds": 600})
    reconcile_job(waiting.pk)
    delete_job(kube, job, "Orphan")
    assert pods_of(kube, job), "orphan propagation leaves the pod running"
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING  # its pod still runs: that is evidence
    delete_pods(kube, job)
    drive(job, {JobState.UNKNOWN}, timeout=30)
    assert job.state_reason.startswith("unknown: the Kubernetes Job is gone")
    assert quota_usage(project=cluster_world.alpha)["gpus"] == 1  # held: it may still be running
    assert waiting.pk not in admission_cycle()
    drive(job, {JobState.LOST}, timeout=30)
    assert job.state_reason.startswith("lost: no pod and no outcome seen")
    assert job.exit_code is None
    assert job.finished_at is not None
    assert quota_usage(project=cluster_world.alpha)["gpus"] == 0
    drive(waiting, {JobState.RUNNING})  # the queue gave the GPU to the next job
    assert transitions(job)[-3:] == ["running", "unknown", "lost"]
    services.job_cancel(actor=cluster_world.member, job=waiting)
    reconcile_job(waiting.pk)


def test_an_unknown_job_whose_job_shows_up_again_is_running_again(
    cluster_world: World, kube: RealKubeClient
) -> None:
    job = drive(submit(cluster_world, simulate={"run_seconds": 600}), {JobState.RUNNING})
    started = job.started_at
    delete_job(kube, job, "Background")
    wait_for(lambda: not pods_of(kube, job), 60, "the pods collected", every=0.5)
    drive(job, {JobState.UNKNOWN}, timeout=30)
    assert quota_usage(project=cluster_world.alpha)["gpus"] == 1
    # As a restored API server would have it: the same Job, suspended as first made. The reconcile
    # must not leave it suspended under an unknown job (it may be running).
    assert (
        kube.create(paths.jobs(job.namespace), builders.build_job(job.job_spec(), builders.job_identity(job)))
        is not None
    )
    drive(job, {JobState.RUNNING})
    assert job.started_at == started
    assert transitions(job)[-3:] == ["running", "unknown", "running"]
    services.job_cancel(actor=cluster_world.member, job=job)
    reconcile_job(job.pk)
    wait_for(lambda: kube.get(paths.job(job.namespace, job.k8s_name)) is None, 30, "Job deleted")
