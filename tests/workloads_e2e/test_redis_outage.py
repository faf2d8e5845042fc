"""T08 (Redis part): Redis stopped for a minute during submissions; nothing lost, all dispatched after.

Submissions during the outage still answer 201 (the intent is in the Postgres outbox, written in
the submit transaction); when Redis comes back (empty) the controller republishes the outbox and
the sweep re-enqueues the rest, so every job runs exactly once.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.conf import settings

from portal.localcluster import ClusterHandle
from tests.fixtures.personas import World, api_client
from tests.workloads_e2e.conftest import cluster_jobs, wait_for
from tests.workloads_e2e.harness import running_controller, use_broker
from tests.workloads_e2e.procs import PrivateRedis, start_worker, stop_process, worker_env
from workloads.choices import JobState
from workloads.k8s.client import RealKubeClient
from workloads.models import Job, JobEvent, ReconcileOutbox
from workloads.tasks import sweep
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
OUTAGE_S = 60


def _submit(client: object, n: int) -> list[str]:
    body = {
        "project": "alpha",
        "image": IMAGE,
        "cpu_millicores": 100,
        "memory_mib": 64,
        "simulate": {"run_seconds": 2},
    }
    ids = []
    for _ in range(n):
        response = client.post("/api/v1/jobs/", body, format="json")  # type: ignore[attr-defined]
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    return ids


def _all_succeeded() -> bool:
    sweep()
    return set(Job.objects.values_list("state", flat=True)) == {JobState.SUCCEEDED}


def test_submissions_survive_a_redis_outage(
    world: World, kube: RealKubeClient, k8s_cluster: ClusterHandle, tmp_path: Path
) -> None:
    allow_images(world.alpha)
    world.alpha.quota.max_concurrent_jobs = 40
    world.alpha.quota.save()
    client = api_client(world.member)
    redis = PrivateRedis(tmp_path)
    redis.start()
    env = worker_env(
        redis_url=redis.url,
        kubeconfig=str(k8s_cluster.kubeconfig),
        prefix=settings.GPUPORTAL_NAMESPACE_PREFIX,
    )
    worker = start_worker(env, tmp_path / "worker.log", "outage")
    try:
        with use_broker(redis.url), running_controller(kube):
            before = _submit(client, 5)
            redis.stop()
            started = time.monotonic()
            during = []
            while time.monotonic() - started < OUTAGE_S:
                during += _submit(client, 1)
                time.sleep(4)
            assert ReconcileOutbox.objects.filter(job__uid__in=during).count() == len(during)
            redis.start()
            wait_for(_all_succeeded, 240, "every job succeeded after the outage", every=5)
    finally:
        stop_process(worker)
        redis.stop()
    uids = sorted(before + during)
    in_cluster = sorted(
        o["metadata"]["labels"]["gpuportal.dev/job-uid"] for o in cluster_jobs(kube, world.alpha.namespace)
    )
    assert in_cluster == uids, "exactly one Kubernetes Job per submission"
    assert not ReconcileOutbox.objects.exists()
    # The controller's event watch fed the timelines with the cluster's own events.
    reasons = set(JobEvent.objects.filter(kind="k8s").values_list("reason", flat=True))
    assert {"Scheduled", "SuccessfulCreate"} & reasons, reasons
