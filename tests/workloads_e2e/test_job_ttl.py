"""TTL against the real kube-controller-manager: a finished job's Kubernetes Job (and its pod) is
removed by the ttl-after-finished controller, while the portal keeps the row, its log tail and its
events; the reconcile that the Job's deletion triggers and the next sweep change nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from tests.fixtures.personas import World
from tests.workloads_e2e.conftest import wait_for
from tests.workloads_e2e.test_job_lifecycle import drive, submit
from workloads.choices import JobState
from workloads.k8s import labels, paths
from workloads.k8s.client import RealKubeClient
from workloads.k8s.status import event_projection
from workloads.models import Job, OrphanReport
from workloads.selectors import jobs_needing_reconcile
from workloads.services.cluster_sync import sweep
from workloads.services.k8s_events import k8s_events_record
from workloads.tasks import reconcile_job

pytestmark = [pytest.mark.cluster, pytest.mark.django_db]
TTL_S = 8


def record_events(kube: RealKubeClient, job: Job) -> None:
    """What the controller's Event watch does for this job's namespace, in one batch."""
    items = (kube.get(f"/api/v1/namespaces/{job.namespace}/events") or {}).get("items") or []
    k8s_events_record(events=[e for e in map(event_projection, items) if e is not None])


def kept(job: Job) -> dict[str, Any]:
    job.refresh_from_db()
    return {
        "state": job.state,
        "changed": job.state_changed_at,
        "exit": job.exit_code,
        "log": job.log_tail,
        "events": list(job.events.order_by("pk").values_list("pk", "kind", "reason", "to_state")),
    }


@override_settings(GPUPORTAL_JOB_TTL_SECONDS=TTL_S)
def test_the_ttl_controller_removes_a_finished_job_and_the_portal_keeps_its_record(
    cluster_world: World, kube: RealKubeClient
) -> None:
    job = submit(cluster_world, simulate={"run_seconds": 2})
    drive(job, {JobState.SUCCEEDED})
    path = paths.job(job.namespace, job.k8s_name)
    manifest = kube.get(path)
    assert manifest is not None, "the TTL removed the Job before the test could read it"
    assert manifest["spec"]["ttlSecondsAfterFinished"] == TTL_S
    record_events(kube, job)
    before = kept(job)
    assert "step 3/3 done" in before["log"]
    kinds = {(kind, to or reason) for _, kind, reason, to in before["events"]}
    assert {("transition", "succeeded"), ("k8s", "Scheduled")} <= kinds, before["events"]
    wait_for(lambda: kube.get(path) is None, 90, "the TTL controller removed the Job", every=1.0)
    selector = {"labelSelector": f"{labels.UID_LABEL}={job.uid}"}
    wait_for(lambda: not (kube.get(paths.pods(job.namespace), selector) or {}).get("items"), 90, "pod gone")
    reconcile_job(job.pk)  # what the watch's DELETED event of the Job (and of its pod) sends
    assert job.pk not in jobs_needing_reconcile()
    sweep(client=kube)
    assert kept(job) == before
    job.refresh_from_db()
    assert job.deleted_in_cluster_at is None  # the portal deleted nothing: the TTL controller did
    assert not OrphanReport.objects.filter(name=job.k8s_name).exists()
