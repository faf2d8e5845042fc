"""The whole job lifecycle against the in-memory client (the cluster tests repeat it for real)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.fixtures.personas import World
from workloads.admission.cycle import admission_cycle
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.models import Job, ReconcileOutbox
from workloads.services import jobs as services
from workloads.tasks import notify_job, reconcile_job, reconcile_job_uid
from workloads.tests.conftest import IMAGE
from workloads.tests.fakes import FakeKube

pytestmark = pytest.mark.django_db


def submit(world: World, **spec: Any) -> Job:
    return services.job_submit(
        actor=world.member, project=world.alpha, data={"image": IMAGE, "gpus": 1, **spec}
    )


def add_pod(fake: FakeKube, job: Job, phase: str, exit_code: int | None = None) -> None:
    status: dict[str, Any] = {"phase": phase, "startTime": "2026-11-30T10:00:00Z"}
    if exit_code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": exit_code}}}]
    name = f"{job.k8s_name}-abcde"
    fake.objects[f"{paths.pods(job.namespace)}/{name}"] = {
        "metadata": {
            "name": name,
            "labels": {"gpuportal.dev/job-uid": str(job.uid)},
            "creationTimestamp": "2026-11-30T10:00:00Z",
        },
        "spec": {"nodeName": "gpu-node-0"},
        "status": status,
    }


def set_condition(fake: FakeKube, job: Job, kind: str, reason: str = "") -> None:
    obj = fake.objects[paths.job(job.namespace, job.k8s_name)]
    obj["status"] = {
        "conditions": [
            {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": "2026-11-30T10:05:00Z"}
        ]
    }


def test_submit_writes_outbox_and_touches_no_cluster(
    jobs_world: World, fake_kube: FakeKube, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks() as callbacks:
        job = submit(jobs_world)
    assert job.state == JobState.QUEUED
    assert ReconcileOutbox.objects.filter(job=job).exists()
    assert len(callbacks) == 1
    assert fake_kube.calls == []


def test_it_runs_to_success_and_keeps_the_log(jobs_world: World, fake_kube: FakeKube) -> None:
    job = submit(jobs_world)
    reconcile_job(job.pk)
    manifest = fake_kube.objects[paths.job("gp-alpha", job.k8s_name)]
    assert manifest["spec"]["suspend"] is True
    assert admission_cycle() == [job.pk]
    reconcile_job(job.pk)
    assert manifest["spec"]["suspend"] is False
    add_pod(fake_kube, job, "Running")
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert (job.state, job.node) == (JobState.RUNNING, "gpu-node-0")
    fake_kube.logs[paths.pod_log("gp-alpha", job.pod_name)] = b"x" * 10 + b"hello\n"
    set_condition(fake_kube, job, "Complete")
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert (job.state, job.exit_code, job.log_tail) == (JobState.SUCCEEDED, 0, "xxxxxxxxxxhello\n")
    assert list(job.events.values_list("to_state", flat=True).exclude(to_state="")) == [
        "queued",
        "admitted",
        "running",
        "succeeded",
    ]
    assert not ReconcileOutbox.objects.filter(job=job).exists()


def test_a_failing_job_records_its_exit_code(jobs_world: World, fake_kube: FakeKube) -> None:
    job = submit(jobs_world)
    reconcile_job(job.pk)
    admission_cycle()
    add_pod(fake_kube, job, "Failed", exit_code=3)
    set_condition(fake_kube, job, "Failed", "BackoffLimitExceeded")
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert (job.state, job.exit_code) == (JobState.FAILED, 3)
    assert job.state_reason.startswith("BackoffLimitExceeded")


def test_cancel_deletes_with_background_propagation(jobs_world: World, fake_kube: FakeKube) -> None:
    job = submit(jobs_world)
    reconcile_job(job.pk)
    services.job_cancel(actor=jobs_world.owner, job=job)
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert job.cancelled_by == jobs_world.owner
    assert ("DELETE", paths.job("gp-alpha", job.k8s_name)) in fake_kube.calls
    assert job.deleted_in_cluster_at is not None


def _cancelled_while_running(world: World, fake: FakeKube, log: bytes) -> Job:
    """A job whose pod runs and has printed `log`, cancelled (not reconciled yet)."""
    job = submit(world)
    reconcile_job(job.pk)
    admission_cycle()
    reconcile_job(job.pk)
    add_pod(fake, job, "Running")
    reconcile_job(job.pk)
    job.refresh_from_db()
    fake.logs[paths.pod_log("gp-alpha", job.pod_name)] = log
    services.job_cancel(actor=world.owner, job=job)
    return job


def test_a_nul_in_the_log_is_kept_as_a_replacement_character(jobs_world: World, fake_kube: FakeKube) -> None:
    job = _cancelled_while_running(jobs_world, fake_kube, b"before\x00after\n")
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.log_tail == "before\ufffdafter\n"
    assert ("DELETE", paths.job("gp-alpha", job.k8s_name)) in fake_kube.calls


def test_a_log_the_database_refuses_never_blocks_the_delete(jobs_world: World, fake_kube: FakeKube) -> None:
    job = _cancelled_while_running(jobs_world, fake_kube, b"some log\n")
    # Whatever the database refuses in the log (the NUL it once refused, or anything else).
    with connection.cursor() as cursor:
        cursor.execute(
            "create function refuse_log() returns trigger language plpgsql as $$ begin "
            "if new.log_tail is distinct from old.log_tail then raise exception 'refused'; end if; "
            "return new; end $$"
        )
        cursor.execute(
            "create trigger refuse_log before update on workloads_job "
            "for each row execute function refuse_log()"
        )
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert ("DELETE", paths.job("gp-alpha", job.k8s_name)) in fake_kube.calls
    assert job.deleted_in_cluster_at is not None
    assert job.state == JobState.CANCELLED


def test_a_repeated_reconcile_creates_one_job(jobs_world: World, fake_kube: FakeKube) -> None:
    job = submit(jobs_world)
    Job.objects.filter(pk=job.pk).update(created_in_cluster_at=None)
    for _ in range(3):
        Job.objects.filter(pk=job.pk).update(created_in_cluster_at=None)
        reconcile_job(job.pk)
    assert sum(1 for p in fake_kube.objects if p.startswith(paths.jobs("gp-alpha") + "/")) == 1


def test_a_vanished_job_is_unknown_not_failed(jobs_world: World, fake_kube: FakeKube) -> None:
    job = submit(jobs_world)
    reconcile_job(job.pk)
    fake_kube.objects.pop(paths.job("gp-alpha", job.k8s_name))
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    assert job.events.filter(reason__startswith="unknown").exists()


def test_admission_respects_the_project_quota(jobs_world: World, fake_kube: FakeKube) -> None:
    jobs = [submit(jobs_world, gpus=4) for _ in range(3)]
    assert admission_cycle() == [jobs[0].pk, jobs[1].pk]
    assert admission_cycle() == []


def test_notifications_respect_the_owner_setting(jobs_world: World) -> None:
    job = submit(jobs_world)
    notify_job(job.pk, "started")
    assert len(mail.outbox) == 1
    jobs_world.member.notify_by_email = False
    jobs_world.member.save()
    notify_job(job.pk, "failed")
    assert len(mail.outbox) == 1


def test_rerun_with_edits_keeps_the_rest(jobs_world: World) -> None:
    job = submit(jobs_world, args=["--lr", "0.1"])
    again = services.job_rerun(actor=jobs_world.member, job=job, edits={"gpus": 2})
    assert (again.gpus, again.args, again.rerun_of) == (2, ["--lr", "0.1"], job)


def test_a_cancel_racing_the_create_leaves_no_cluster_job(jobs_world: World, fake_kube: FakeKube) -> None:
    job = submit(jobs_world)
    stale = Job.objects.get(pk=job.pk)  # a reconcile that read the row before the cancel committed
    services.job_cancel(actor=jobs_world.owner, job=job)
    reconcile_job(job.pk)  # the cancel's reconcile: nothing to delete yet
    from workloads.services.cluster_sync import job_sync

    fake_kube.calls.clear()
    job_sync(job=stale, client=fake_kube)  # the stale one reloads the state before it makes anything
    assert paths.job("gp-alpha", job.k8s_name) not in fake_kube.objects
    assert ("POST", paths.jobs(job.namespace)) not in fake_kube.calls  # not made and deleted again


def test_a_reconcile_whose_job_row_was_deleted_makes_nothing(jobs_world: World, fake_kube: FakeKube) -> None:
    from workloads.services.cluster_sync import job_sync

    job = submit(jobs_world)
    stale = Job.objects.select_related("project").get(pk=job.pk)
    Job.objects.filter(pk=job.pk).delete()  # an operator removed it in the admin meanwhile
    job_sync(job=stale, client=fake_kube)
    assert ("POST", paths.jobs(job.namespace)) not in fake_kube.calls
    assert paths.job(job.namespace, job.k8s_name) not in fake_kube.objects


def test_a_request_written_while_a_reconcile_runs_outlives_it(jobs_world: World, fake_kube: FakeKube) -> None:
    """The reconcile clears only the request it saw: a cancel arriving mid-run keeps its outbox row,
    so the cancel still reaches the cluster even if its own publish is lost."""
    from workloads.services.cluster_sync import job_sync
    from workloads.services.publisher import outbox_write

    job = submit(jobs_world)
    seen = ReconcileOutbox.objects.get(job=job).requested_at
    real_create = fake_kube.create

    def create_then_a_new_request(path: str, body: dict[str, Any], *, dry_run: bool = False) -> Any:
        created = real_create(path, body, dry_run=dry_run)
        outbox_write(job.pk)  # e.g. the user cancels while the Job is being created
        return created

    fake_kube.create = create_then_a_new_request  # type: ignore[method-assign]
    job_sync(job=Job.objects.select_related("project").get(pk=job.pk), client=fake_kube)
    row = ReconcileOutbox.objects.filter(job=job).first()
    assert row is not None
    assert row.requested_at > seen


def test_a_reconcile_that_loaded_an_admitted_job_does_not_unsuspend_it_after_a_preemption(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    from workloads.services.cluster_sync import job_sync

    job = submit(jobs_world)
    reconcile_job(job.pk)  # created, suspended
    assert admission_cycle() == [job.pk]
    stale = Job.objects.select_related("project").get(pk=job.pk)  # loaded as admitted
    Job.objects.filter(pk=job.pk).update(state=JobState.PREEMPTED)  # the preemption commits meanwhile
    job_sync(job=stale, client=fake_kube)
    assert fake_kube.objects[paths.job(job.namespace, job.k8s_name)]["spec"]["suspend"] is True


@pytest.mark.parametrize("to", [JobState.RUNNING, JobState.SUCCEEDED, JobState.FAILED])
def test_a_queued_job_leaves_the_queue_only_through_admission(jobs_world: World, to: JobState) -> None:
    from workloads.services.transitions import job_transition

    job = submit(jobs_world)
    assert not job_transition(job=job, to=to, reason="pods seen without admission")
    job.refresh_from_db()
    assert job.state == JobState.QUEUED


def test_a_volume_removed_before_the_job_was_made_cancels_it_with_the_reason(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    from workloads.models import ProjectVolume

    volume = ProjectVolume.objects.create(project=jobs_world.alpha, name="scratch", claim_name="scratch")
    job = submit(jobs_world, volumes=[{"volume": "scratch", "mount_path": "/scratch"}])
    volume.delete()
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert job.state_reason == "volume scratch was removed from the project before the job started"
    assert paths.job(job.namespace, job.k8s_name) not in fake_kube.objects
    assert not ReconcileOutbox.objects.filter(job=job).exists()


def test_making_a_job_costs_one_get_and_one_post(jobs_world: World, fake_kube: FakeKube) -> None:
    """The POST's answer is the Job as made, and a Job made this instant has no pods to list."""
    job = submit(jobs_world)
    reconcile_job(job.pk)
    assert fake_kube.calls == [
        ("GET", paths.job(job.namespace, job.k8s_name)),
        ("POST", paths.jobs(job.namespace)),
    ]
    job.refresh_from_db()
    assert job.created_in_cluster_at is not None
    assert job.state == JobState.QUEUED
    fake_kube.calls.clear()
    reconcile_job(job.pk)  # made already: read, and its pods listed, as every later run does
    assert [verb for verb, _ in fake_kube.calls] == ["GET", "GET"]


def test_a_job_admitted_before_its_job_is_made_is_made_running_in_one_post(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    """Under load admission often comes first: the Job is made un-suspended, not suspended and then
    patched (which would also cost the Job controller a suspend and a resume)."""
    job = submit(jobs_world)
    assert admission_cycle() == [job.pk]
    fake_kube.calls.clear()  # admission's own reads of the nodes
    reconcile_job(job.pk)
    assert fake_kube.calls == [
        ("GET", paths.job(job.namespace, job.k8s_name)),
        ("POST", paths.jobs(job.namespace)),
    ]
    assert fake_kube.objects[paths.job(job.namespace, job.k8s_name)]["spec"]["suspend"] is False


def test_a_job_preempted_after_its_reconcile_loaded_it_admitted_is_made_suspended(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    from workloads.services.cluster_sync import job_sync

    job = submit(jobs_world)
    assert admission_cycle() == [job.pk]
    stale = Job.objects.select_related("project").get(pk=job.pk)  # loaded as admitted, not yet made
    Job.objects.filter(pk=job.pk).update(state=JobState.PREEMPTED)  # the preemption commits meanwhile
    job_sync(job=stale, client=fake_kube)
    assert fake_kube.objects[paths.job(job.namespace, job.k8s_name)]["spec"]["suspend"] is True
    assert ("PATCH", paths.job(job.namespace, job.k8s_name)) not in fake_kube.calls


def test_a_watch_driven_reconcile_costs_no_query_more_than_one_by_id(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    """The label's uid finds and loads the job in one query: an id lookup first would be one more
    round trip for every watched change of a Job or its pods."""
    job = submit(jobs_world)
    reconcile_job(job.pk)
    assert admission_cycle() == [job.pk]
    add_pod(fake_kube, job, "Running")
    reconcile_job(job.pk)
    with CaptureQueriesContext(connection) as by_id:
        reconcile_job(job.pk)
    with CaptureQueriesContext(connection) as by_uid:
        reconcile_job_uid(str(job.uid))
    assert len(by_uid) == len(by_id), [q["sql"][:80] for q in by_uid.captured_queries]
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
