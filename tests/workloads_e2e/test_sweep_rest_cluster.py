"""The sweep against the real control plane: a queued job's suspended Job is read as at rest and
left out; once someone un-suspends it behind the portal, the next sweep enqueues the job again (its
reconcile then suspends it back)."""

from __future__ import annotations

import pytest

from tests.fixtures.personas import World
from tests.workloads_e2e.test_queue_cluster import SPEC
from workloads.choices import JobState
from workloads.k8s import paths
from workloads.k8s.client import RealKubeClient
from workloads.services import cluster_sync
from workloads.services import jobs as services
from workloads.tasks import reconcile_job, reconcile_namespace
from workloads.tests.test_sweep_rest import capture_enqueues

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_queued_job_at_rest_is_left_out_until_its_job_changes(
    cluster_world: World, kube: RealKubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = cluster_world
    reconcile_namespace(world.alpha.pk)
    job = services.job_submit(actor=world.member, project=world.alpha, data=SPEC)
    reconcile_job(job.pk)  # makes its Job, suspended: nothing admitted it
    job.refresh_from_db()
    assert job.state == JobState.QUEUED
    assert job.created_in_cluster_at is not None
    sent = capture_enqueues(monkeypatch)
    try:
        cluster_sync.sweep(client=kube)
        assert job.pk not in sent
        # No pods (parallelism 0), so only the suspend flag tells the sweep it is not at rest.
        kube.patch(paths.job(job.namespace, job.k8s_name), {"spec": {"suspend": False, "parallelism": 0}})
        cluster_sync.sweep(client=kube)
        assert job.pk in sent
    finally:
        kube.delete(paths.namespace(job.namespace))
