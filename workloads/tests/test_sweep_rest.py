"""The sweep leaves queued jobs at rest alone: a queued job whose Kubernetes Job is suspended with no
pod running has nothing to converge, so it is not re-enqueued every sweep; any other state is.
The real cluster's side is tests/workloads_e2e/test_sweep_rest_cluster.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.k8s import labels
from workloads.k8s.errors import K8sError
from workloads.models import Job
from workloads.services import cluster_sync
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE
from workloads.tests.test_pages import Paged

pytestmark = pytest.mark.django_db


def _job(world: World, state: JobState, *, made: bool = True) -> Job:
    job = services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE})
    Job.objects.filter(pk=job.pk).update(state=state, created_in_cluster_at=timezone.now() if made else None)
    return job


def _k8s(job: Job | None, *, suspend: bool, active: int = 0, uid: str = "") -> dict[str, Any]:
    name = job.k8s_name if job else "stray"
    return {
        "metadata": {
            "name": name,
            "namespace": "gp-alpha",
            "labels": {labels.UID_LABEL: uid or str(job and job.uid)},
        },
        "spec": {"suspend": suspend, "template": {}},
        "status": {"active": active} if active else {},
    }


def capture_enqueues(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sent: list[int] = []

    def enqueue(job_id: int) -> bool:
        sent.append(job_id)
        return True

    monkeypatch.setattr(cluster_sync, "enqueue_reconcile", enqueue)
    return sent


def test_only_queued_jobs_at_rest_are_left_out(jobs_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    rest = _job(jobs_world, JobState.QUEUED)
    unsuspended = _job(jobs_world, JobState.QUEUED)  # someone un-suspended it: must be put back
    unrecorded = _job(jobs_world, JobState.QUEUED, made=False)  # made by a run that died before recording it
    missing = _job(jobs_world, JobState.QUEUED)  # its Job is gone from the cluster
    running = _job(jobs_world, JobState.RUNNING)
    active = _job(jobs_world, JobState.QUEUED)  # suspended, but a pod still runs
    cluster = [
        _k8s(rest, suspend=True),
        _k8s(unsuspended, suspend=False),
        _k8s(unrecorded, suspend=True),
        _k8s(running, suspend=False, active=1),
        _k8s(active, suspend=True, active=1),
        _k8s(None, suspend=True, uid="not-a-uid"),  # a stray Job with the portal's label
    ]
    sent = capture_enqueues(monkeypatch)
    assert cluster_sync.sweep(client=Paged(cluster)) == 5  # type: ignore[arg-type]
    assert sorted(sent) == sorted([unsuspended.pk, unrecorded.pk, missing.pk, running.pk, active.pk])


def test_when_the_list_fails_every_job_is_enqueued_and_the_error_raised(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    rest = _job(jobs_world, JobState.QUEUED)

    class Down:
        def list_raw(self, path: str, query: dict[str, str] | None = None) -> bytes:
            raise K8sError(503, "the API server is restarting")

    sent = capture_enqueues(monkeypatch)
    with pytest.raises(K8sError):
        cluster_sync.sweep(client=Down())  # type: ignore[arg-type]
    assert sent == [rest.pk]
