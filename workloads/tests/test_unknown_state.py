"""Unknown and lost (docs/reliability.md: a job is failed only on evidence) against the in-memory
client: a job whose evidence vanished is unknown, keeps its quota, comes back when the evidence
does, and is lost (quota released) only after GPUPORTAL_JOB_UNKNOWN_SECONDS; an unreadable cluster
moves nothing. The cluster test repeats
the main paths for real (tests/workloads_e2e/test_job_unknown.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from tests.fixtures.personas import World
from workloads.admission.cycle import admission_cycle
from workloads.choices import ALLOWED_TRANSITIONS, TERMINAL_STATES, JobState, TaskName
from workloads.k8s import paths
from workloads.k8s.errors import K8sError
from workloads.k8s.status import observe
from workloads.models import Job
from workloads.selectors import jobs_needing_reconcile, quota_usage
from workloads.services import cluster_sync
from workloads.services import jobs as services
from workloads.tests.conftest import capture_sends
from workloads.tests.fakes import FakeKube
from workloads.tests.test_lifecycle_fake import add_pod, set_condition, submit

pytestmark = pytest.mark.django_db


class DownKube(FakeKube):
    """The API server answers 503 to everything (down, or behind a failing load balancer)."""

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        raise K8sError(503, "Service Unavailable")


class JobsDownKube(FakeKube):
    """Only the Jobs API fails (503); pods still list: a partial outage must not read as "gone"."""

    def __init__(self, real: FakeKube) -> None:
        super().__init__()
        self.objects = real.objects

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        if path.startswith("/apis/batch/"):
            raise K8sError(503, "Service Unavailable")
        return super().get(path, query)


def sync(job: Job, fake: FakeKube) -> Job:
    cluster_sync.job_reconcile(job_id=job.pk, client=fake)
    job.refresh_from_db()
    return job


def running(world: World, fake: FakeKube, gpus: int = 1) -> Job:
    job = submit(world, gpus=gpus)
    sync(job, fake)
    assert job.pk in admission_cycle()
    add_pod(fake, job, "Running")
    assert sync(job, fake).state == JobState.RUNNING
    return job


def vanish(fake: FakeKube, job: Job) -> None:
    """The Kubernetes Job and its pods deleted behind the portal's back."""
    fake.objects.pop(paths.job(job.namespace, job.k8s_name))
    for path in [p for p in fake.objects if p.startswith(paths.pods(job.namespace) + "/")]:
        del fake.objects[path]


def unknown_since(job: Job, seconds: float) -> None:
    Job.objects.filter(pk=job.pk).update(state_changed_at=timezone.now() - timedelta(seconds=seconds))


def test_the_state_machine_has_unknown_and_lost() -> None:
    assert JobState.LOST in TERMINAL_STATES
    assert JobState.UNKNOWN not in TERMINAL_STATES
    assert JobState.UNKNOWN in ALLOWED_TRANSITIONS[JobState.RUNNING]
    assert JobState.UNKNOWN in ALLOWED_TRANSITIONS[JobState.ADMITTED]
    assert ALLOWED_TRANSITIONS[JobState.UNKNOWN] == {
        JobState.RUNNING,
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.CANCELLED,
        JobState.LOST,
    }


def test_a_vanished_running_job_is_unknown_holds_its_quota_then_is_lost(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    first, second = running(jobs_world, fake_kube, 4), running(jobs_world, fake_kube, 4)
    vanish(fake_kube, first)
    sync(first, fake_kube)
    assert first.state == JobState.UNKNOWN
    assert first.state_reason.startswith("unknown: the Kubernetes Job is gone")
    waiting = submit(jobs_world, gpus=4)
    assert quota_usage(project=jobs_world.alpha)["gpus"] == 8
    assert admission_cycle() == []  # it may still run on its GPUs: they stay held
    unknown_since(first, 599)
    assert sync(first, fake_kube).state == JobState.UNKNOWN
    unknown_since(first, 601)
    sync(first, fake_kube)
    assert (first.state, first.exit_code) == (JobState.LOST, None)
    assert first.state_reason.startswith("lost: no pod and no outcome seen for 6")
    assert first.finished_at is not None
    assert first.log_captured
    assert first.pk not in jobs_needing_reconcile()
    assert quota_usage(project=jobs_world.alpha)["gpus"] == 4
    assert admission_cycle() == [waiting.pk]
    assert second.pk in jobs_needing_reconcile()


def test_an_admitted_job_whose_job_vanished_is_unknown(jobs_world: World, fake_kube: FakeKube) -> None:
    job = submit(jobs_world)
    sync(job, fake_kube)
    admission_cycle()
    vanish(fake_kube, job)
    assert sync(job, fake_kube).state == JobState.UNKNOWN


@override_settings(GPUPORTAL_JOB_UNKNOWN_SECONDS=0)
def test_an_unreadable_cluster_moves_nothing(jobs_world: World, fake_kube: FakeKube) -> None:
    job, other = running(jobs_world, fake_kube), running(jobs_world, fake_kube)
    vanish(fake_kube, job)
    vanish(fake_kube, other)
    assert sync(other, fake_kube).state == JobState.UNKNOWN
    for down in (DownKube(), JobsDownKube(fake_kube)):
        for j in (job, other):
            with pytest.raises(K8sError):
                cluster_sync.job_reconcile(job_id=j.pk, client=down)
    job.refresh_from_db()
    other.refresh_from_db()
    assert (job.state, other.state) == (JobState.RUNNING, JobState.UNKNOWN)
    assert sync(other, fake_kube).state == JobState.LOST  # the first successful read decides


def test_evidence_back_makes_it_running_again_with_its_start(
    jobs_world: World,
    fake_kube: FakeKube,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    notes = capture_sends(monkeypatch, TaskName.NOTIFY_JOB)
    with django_capture_on_commit_callbacks(execute=True):
        job = running(jobs_world, fake_kube)
        started = job.started_at
        manifest = fake_kube.objects[paths.job(job.namespace, job.k8s_name)]
        vanish(fake_kube, job)
        assert sync(job, fake_kube).state == JobState.UNKNOWN
        fake_kube.objects[paths.job(job.namespace, job.k8s_name)] = manifest  # e.g. a restored API server
        add_pod(fake_kube, job, "Running")
        for pod in [o for p, o in fake_kube.objects.items() if "/pods/" in p]:
            pod["status"]["startTime"] = "2026-11-30T11:00:00Z"  # a new pod, a later start
        sync(job, fake_kube)
    assert (job.state, job.started_at) == (JobState.RUNNING, started)
    assert [kind for _, kind in notes] == ["started"]  # told once: it is the same run
    set_condition(fake_kube, job, "Complete")
    assert sync(job, fake_kube).state == JobState.SUCCEEDED
    states = list(job.events.exclude(to_state="").values_list("to_state", flat=True))
    assert states[-4:] == ["running", "unknown", "running", "succeeded"]


def test_a_pod_left_behind_by_a_deleted_job_is_evidence(jobs_world: World, fake_kube: FakeKube) -> None:
    job = running(jobs_world, fake_kube)
    fake_kube.objects.pop(paths.job(job.namespace, job.k8s_name))  # orphan propagation: the pod stays
    assert sync(job, fake_kube).state == JobState.RUNNING
    add_pod(fake_kube, job, "Succeeded", exit_code=0)
    sync(job, fake_kube)
    assert (job.state, job.exit_code) == (JobState.SUCCEEDED, 0)
    assert "its Kubernetes Job is gone" in job.state_reason


def test_a_failed_orphan_pod_fails_the_job_with_its_exit_code(jobs_world: World, fake_kube: FakeKube) -> None:
    job = running(jobs_world, fake_kube)
    vanish(fake_kube, job)
    assert sync(job, fake_kube).state == JobState.UNKNOWN
    add_pod(fake_kube, job, "Failed", exit_code=7)
    sync(job, fake_kube)
    assert (job.state, job.exit_code) == (JobState.FAILED, 7)


def test_a_job_without_pod_for_long_is_unknown_then_lost_and_deleted(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    job = running(jobs_world, fake_kube)
    for path in [p for p in fake_kube.objects if "/pods/" in p]:
        del fake_kube.objects[path]
    sync(job, fake_kube)
    assert job.state == JobState.RUNNING
    assert job.no_evidence_since is not None
    Job.objects.filter(pk=job.pk).update(no_evidence_since=timezone.now() - timedelta(seconds=121))
    sync(job, fake_kube)
    assert job.state == JobState.UNKNOWN
    assert job.state_reason.startswith("unknown: the Kubernetes Job has no pod and no outcome since")
    unknown_since(job, 601)
    sync(job, fake_kube)
    assert job.state == JobState.LOST
    assert paths.job(job.namespace, job.k8s_name) not in fake_kube.objects  # never starts on given GPUs


def test_a_pod_back_clears_the_no_pod_clock(jobs_world: World, fake_kube: FakeKube) -> None:
    job = running(jobs_world, fake_kube)
    pods = {p: o for p, o in fake_kube.objects.items() if "/pods/" in p}
    for path in pods:
        del fake_kube.objects[path]
    assert sync(job, fake_kube).no_evidence_since is not None
    fake_kube.objects.update(pods)
    assert sync(job, fake_kube).no_evidence_since is None


def test_cancel_an_unknown_job_deletes_its_job_and_ends_the_row(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    job = running(jobs_world, fake_kube)
    for path in [p for p in fake_kube.objects if "/pods/" in p]:
        del fake_kube.objects[path]
    with override_settings(GPUPORTAL_JOB_NO_POD_SECONDS=0):
        assert sync(job, fake_kube).state == JobState.UNKNOWN
    services.job_cancel(actor=jobs_world.member, job=job)
    sync(job, fake_kube)
    assert job.state == JobState.CANCELLED
    assert job.deleted_in_cluster_at is not None
    assert paths.job(job.namespace, job.k8s_name) not in fake_kube.objects
    assert quota_usage(project=jobs_world.alpha)["gpus"] == 0


@override_settings(GPUPORTAL_JOB_UNKNOWN_SECONDS=0)
def test_a_lost_jobs_job_that_shows_up_again_is_deleted(jobs_world: World, fake_kube: FakeKube) -> None:
    job = running(jobs_world, fake_kube)
    manifest = fake_kube.objects[paths.job(job.namespace, job.k8s_name)]
    vanish(fake_kube, job)
    sync(job, fake_kube)
    assert sync(job, fake_kube).state == JobState.LOST
    fake_kube.objects[paths.job(job.namespace, job.k8s_name)] = manifest
    add_pod(fake_kube, job, "Running")
    assert sync(job, fake_kube).state == JobState.LOST
    assert paths.job(job.namespace, job.k8s_name) not in fake_kube.objects


def test_a_suspended_unknown_job_that_shows_up_again_is_not_suspended(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    job = running(jobs_world, fake_kube)
    manifest = fake_kube.objects[paths.job(job.namespace, job.k8s_name)]
    vanish(fake_kube, job)
    assert sync(job, fake_kube).state == JobState.UNKNOWN
    fake_kube.objects[paths.job(job.namespace, job.k8s_name)] = {**manifest, "spec": {"suspend": True}}
    sync(job, fake_kube)
    assert fake_kube.objects[paths.job(job.namespace, job.k8s_name)]["spec"]["suspend"] is False


def test_observe_says_whether_there_was_evidence() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n"}, "status": {"phase": "Pending"}}
    assert not observe(None, []).evidence
    assert not observe({"status": {}}, []).evidence
    assert observe({"status": {}}, [pod]).evidence
    assert observe(None, [pod]).evidence
    assert observe(None, [pod]).state is None
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert observe(done, []).evidence
    assert observe(done, []).state == JobState.SUCCEEDED
