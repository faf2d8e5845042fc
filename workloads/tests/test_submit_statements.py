"""A job's hot paths, statement by statement: what the submit benchmark and the load test pay per job
on the web tier and in the workers.

A POST /api/v1/jobs/ needs no existence checks for rows already in hand, no savepoint per block, no
locked read or savepoints around the outbox row and no read-back of the outbox after commit: with
them it takes 30 statements (17 ms of the web process's CPU, measured). These tests keep those
statements out, and check that the outbox upsert does what update_or_create would. A reconcile
reads the project's volumes only for a job that mounts some."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.fixtures.personas import World
from workloads.choices import TaskName
from workloads.k8s import paths
from workloads.models import ProjectVolume, ReconcileOutbox
from workloads.services import jobs as services
from workloads.services.publisher import outbox_write
from workloads.tasks import reconcile_job
from workloads.tests.conftest import IMAGE, capture_sends
from workloads.tests.fakes import FakeKube

pytestmark = pytest.mark.django_db


def test_a_submission_runs_no_savepoint_existence_check_or_outbox_read(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    sent = capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    # A running site's first submission made the queue settings row (get_or_create, its savepoint).
    services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    sent.clear()
    with CaptureQueriesContext(connection) as ctx, django_capture_on_commit_callbacks(execute=True):
        job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    statements = [q["sql"] for q in ctx.captured_queries]
    assert sent == [job.pk]  # the reconcile still goes out after commit
    assert not [s for s in statements if s.startswith(("SAVEPOINT", "RELEASE"))]
    assert not [s for s in statements if 'SELECT 1 AS "a"' in s or '"_check"' in s]
    outbox = [s for s in statements if "workloads_reconcileoutbox" in s]
    assert len(outbox) == 2, outbox  # the upsert in the transaction, the published mark after commit
    assert outbox[0].startswith("INSERT")
    assert "ON CONFLICT" in outbox[0]
    assert outbox[1].startswith("UPDATE")
    assert len([s for s in statements if "COUNT(" in s]) == 1  # both queue caps from one read


def test_writing_the_outbox_again_renews_the_request_and_keeps_the_attempts(
    jobs_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    job = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    long_ago = timezone.now() - timedelta(hours=1)
    ReconcileOutbox.objects.filter(job=job).update(requested_at=long_ago, published_at=long_ago, attempts=3)
    with transaction.atomic():
        outbox_write(job.pk)
    row = ReconcileOutbox.objects.get(job=job)
    assert (row.published_at, row.attempts) == (None, 3)
    assert row.requested_at > long_ago
    assert ReconcileOutbox.objects.filter(job=job).count() == 1


def test_a_reconcile_reads_the_project_volumes_only_for_a_job_that_mounts_one(
    jobs_world: World, fake_kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    capture_sends(monkeypatch, TaskName.RECONCILE_JOB)
    volume = ProjectVolume.objects.get(project=jobs_world.alpha, name="data")  # the fixture's
    plain = services.job_submit(actor=jobs_world.member, project=jobs_world.alpha, data={"image": IMAGE})
    mounting = services.job_submit(
        actor=jobs_world.member,
        project=jobs_world.alpha,
        data={"image": IMAGE, "volumes": [{"volume": volume.name, "mount_path": "/data"}]},
    )
    reads = []
    for job in (plain, mounting):
        with CaptureQueriesContext(connection) as ctx:
            reconcile_job(job.pk)
        reads.append(len([q for q in ctx.captured_queries if "workloads_projectvolume" in q["sql"]]))
    assert reads == [0, 1]
    made = fake_kube.objects[paths.job("gp-alpha", mounting.k8s_name)]["spec"]["template"]["spec"]
    assert made["volumes"][0]["persistentVolumeClaim"]["claimName"] == volume.claim_name
