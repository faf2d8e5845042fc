"""Jobs end to end against the real API server, scheduler, Job controller and kwok nodes.

The reconcile task and the admission cycle are called directly (no worker); the worker and
controller paths run in test_chaos_worker_kill and test_outage_drills.
"""

from __future__ import annotations

from typing import Any

import pytest

from accounts.services import quota_update
from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import cluster_jobs, wait_for
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.logs import log_lines
from workloads.models import Job
from workloads.services import jobs as services
from workloads.services.cluster_sync import namespace_reconcile
from workloads.tasks import reconcile_job
from workloads.tests.conftest import IMAGE

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]


def submit(world: World, **spec: Any) -> Job:
    data = {"image": IMAGE, "gpus": 1, "cpu_millicores": 100, "memory_mib": 64, **spec}
    return services.job_submit(actor=world.member, project=world.alpha, data=data)


def drive(job: Job, until: set[str], timeout: float = 90) -> Job:
    """What the controller and workers do, inline: admit, reconcile, until the job reaches a state."""

    def step() -> Job | None:
        admission_cycle()
        reconcile_job(job.pk)
        job.refresh_from_db()
        return job if job.state in until else None

    return wait_for(step, timeout, f"{job} in {until}", every=1.0)


def test_submit_runs_and_succeeds(cluster_world: World, kube: RealKubeClient) -> None:
    job = submit(cluster_world, simulate={"run_seconds": 4})
    reconcile_job(job.pk)
    manifest = kube.get(paths.job(job.namespace, job.k8s_name))
    assert manifest is not None
    assert manifest["spec"]["suspend"] is True
    drive(job, {JobState.RUNNING})
    assert job.node.startswith("gpu-node-")
    # Read through the API server's pods/log while the pod runs (kwok never ends a follow stream,
    # so the follow mode is exercised by the API test with the kept tail and by the browser test).
    live = b"".join(log_lines(job, follow=False)).decode()
    assert "found 4 x NVIDIA GeForce RTX 5090" in live, live[:300]
    drive(job, {JobState.SUCCEEDED})
    assert job.exit_code == 0
    assert "step 3/3 done" in job.log_tail
    states = list(job.events.exclude(to_state="").values_list("to_state", flat=True))
    assert states == ["queued", "admitted", "running", "succeeded"]


def test_a_job_admitted_before_its_job_is_made_runs_without_being_patched(
    cluster_world: World, kube: RealKubeClient
) -> None:
    """Admission first (under load the usual order): the Job is made un-suspended, and the real Job
    controller starts its pod from that one POST."""
    job = submit(cluster_world, simulate={"run_seconds": 30})
    admission_cycle()
    job.refresh_from_db()
    assert job.state == JobState.ADMITTED
    reconcile_job(job.pk)
    manifest = kube.get(paths.job(job.namespace, job.k8s_name))
    assert manifest is not None
    assert manifest["spec"]["suspend"] is False
    drive(job, {JobState.RUNNING})
    manifest = kube.get(paths.job(job.namespace, job.k8s_name)) or {}
    assert manifest["metadata"]["generation"] == 1  # its spec never changed after the POST


def test_a_failing_job_keeps_its_exit_code(cluster_world: World) -> None:
    job = submit(cluster_world, simulate={"run_seconds": 2, "exit_code": 3})
    drive(job, {JobState.FAILED, JobState.SUCCEEDED})
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)


def test_cancel_while_running_deletes_the_job(cluster_world: World, kube: RealKubeClient) -> None:
    job = submit(cluster_world, simulate={"run_seconds": 120})
    drive(job, {JobState.RUNNING})
    services.job_cancel(actor=cluster_world.owner, job=job)
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert job.cancelled_by == cluster_world.owner
    wait_for(lambda: kube.get(paths.job(job.namespace, job.k8s_name)) is None, 30, "Job deleted")


def test_rerun_with_edits_runs_the_edited_spec(cluster_world: World, kube: RealKubeClient) -> None:
    first = submit(cluster_world, simulate={"run_seconds": 1, "exit_code": 2})
    drive(first, {JobState.FAILED})
    again = services.job_rerun(actor=cluster_world.member, job=first, edits={"simulate": {"run_seconds": 1}})
    drive(again, {JobState.SUCCEEDED})
    assert again.rerun_of == first
    assert len(cluster_jobs(kube, first.namespace)) == 2


def test_namespace_gets_quota_limits_policy_and_follows_quota_changes(
    cluster_world: World, kube: RealKubeClient
) -> None:
    project = cluster_world.alpha
    namespace_reconcile(project_id=project.pk, client=kube)
    ns = kube.get(paths.namespace(project.namespace))
    assert ns is not None
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert kube.get(paths.limit_range(project.namespace, "portal-limits")) is not None
    assert kube.get(paths.network_policy(project.namespace, "default-deny")) is not None
    quota_update(actor=cluster_world.admin, quota=project.quota, changes={"gpus": 3})
    namespace_reconcile(project_id=project.pk, client=kube)
    rq = kube.get(paths.resource_quota(project.namespace, "portal-quota"))
    assert rq is not None
    assert rq["spec"]["hard"]["requests.nvidia.com/gpu"] == "3"
    assert rq["spec"]["hard"]["requests.nvidia.com/gpu.shared"] == "8"


def test_quota_save_enqueues_a_namespace_reconcile_on_commit(
    cluster_world: World, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        quota_update(actor=cluster_world.admin, quota=cluster_world.alpha.quota, changes={"gpus": 2})
    assert callbacks, "the Quota post_save signal must enqueue after commit"


def test_orphans_are_reported_not_deleted(cluster_world: World, kube: RealKubeClient) -> None:
    from workloads.models import OrphanReport
    from workloads.services.cluster_sync import orphans_report

    job = submit(cluster_world)
    reconcile_job(job.pk)
    stray = kube.get(paths.job(job.namespace, job.k8s_name))
    assert stray is not None
    Job.objects.filter(pk=job.pk).delete()
    reports = orphans_report(cluster_jobs=cluster_jobs(kube, job.namespace))
    assert [r.name for r in reports] == [job.k8s_name]
    assert OrphanReport.objects.filter(name=job.k8s_name).exists()
    assert kube.get(paths.job(job.namespace, job.k8s_name)) is not None
