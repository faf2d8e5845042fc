"""Ingesting samples for a running job's GPU stores the job's peaks and busy time (the real Postgres,
through the agents' endpoint): one UPDATE per batch, a retried batch counted once, and only pods of the
job in its own namespace count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from gpu.peaks import PodReading, pod_readings
from gpu.tests.factories import batch, make_gpus, make_node, node_token, series
from plugin.contract import GpuSample, ProcessSample
from tests.fixtures.personas import World
from workloads.choices import JobState
from workloads.models import Job
from workloads.services.peaks import record_readings

pytestmark = pytest.mark.django_db(transaction=True)


def post(secret: str, body: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    response = client.post("/api/v1/ingest/samples", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def running(world: World) -> Job:
    return Job.objects.create(
        project=world.alpha,
        owner=world.owner,
        image="x",
        gpus=1,
        node="gpu-node-0",
        state=JobState.RUNNING,
        started_at=timezone.now() - timedelta(minutes=30),
    )


def test_samples_of_a_running_jobs_gpu_store_its_peaks_and_busy_seconds(world: World) -> None:
    job = running(world)
    node = make_node()
    gpus = make_gpus(node, 2)
    pod = {"namespace": job.namespace, "pod": f"{job.k8s_name}-x7k2p"}
    start = datetime.now(UTC) - timedelta(seconds=60)
    samples = series(gpus[0].uuid, 20, start=start, util=20, **pod)  # 9000 MiB of the job's process
    samples += series(gpus[0].uuid, 10, start=start + timedelta(seconds=20), util=2, **pod)  # idle
    samples += series(
        gpus[1].uuid, 30, start=start, util=99, namespace="gp-beta", pod=pod["pod"]
    )  # not its ns
    secret = node_token(node)
    post(secret, batch(node.name, samples))
    job.refresh_from_db()
    assert (job.peak_gpu_mem_mib, job.peak_sm_pct, job.gpu_mem_total_mib) == (9000, 20, 32768)
    assert job.busy_gpu_seconds == pytest.approx(20.0)  # 20 one-second samples at 20 % >= 5 %
    assert job.telemetry_until is not None

    post(secret, batch(node.name, samples))  # the agent's retry of a batch that was stored
    job.refresh_from_db()
    assert job.busy_gpu_seconds == pytest.approx(20.0)
    later = series(gpus[0].uuid, 5, start=datetime.now(UTC) - timedelta(seconds=5), util=60, **pod)
    post(secret, batch(node.name, later))
    job.refresh_from_db()
    assert (job.peak_sm_pct, job.peak_gpu_mem_mib) == (60, 9000)
    assert job.busy_gpu_seconds == pytest.approx(25.0)


def test_one_select_and_one_update_per_batch_however_many_samples(world: World) -> None:
    jobs = [running(world) for _ in range(3)]
    now = timezone.now()
    readings = [
        PodReading(
            job.namespace,
            f"{job.k8s_name}-abcde",
            f"GPU-{i}",
            now + timedelta(seconds=s),
            100 * s,
            32768,
            50,
            1.0,
        )
        for i, job in enumerate(jobs)
        for s in range(200)
    ]
    readings.append(PodReading("gp-alpha", "notebook-0", "GPU-9", now, 5, 32768, 50, 1.0))  # not a job
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:  # as in ingest
        assert record_readings(readings=readings) == 3
    assert len(queries) == 2, [q["sql"][:80] for q in queries.captured_queries]
    assert [Job.objects.get(pk=j.pk).peak_gpu_mem_mib for j in jobs] == [19900] * 3


def test_readings_sum_a_pods_processes_and_cap_gaps() -> None:
    t0 = datetime.now(UTC)
    proc = ProcessSample(pid=1, mem_used_mib=100, pod_namespace="ns", pod_name="job-a-1", container="c")

    def at(ts: datetime, procs: list[ProcessSample]) -> GpuSample[datetime]:
        return GpuSample(
            gpu_uuid="GPU-0",
            ts=ts,
            util_gpu=30,
            util_mem=0,
            mem_used_mib=0,
            mem_total_mib=1000,
            temp_c=40.0,
            power_w=100.0,
            sm_clock_mhz=0,
            mem_clock_mhz=0,
            ecc_sbe=0,
            ecc_dbe=0,
            processes=procs,
        )

    samples = [
        at(t0, [proc, msgspec.structs.replace(proc, pid=2), msgspec.structs.replace(proc, pod_name=None)]),
        at(t0 + timedelta(seconds=2), [proc]),
        at(t0 + timedelta(seconds=60), [proc]),  # after a gap: not 58 busy seconds
    ]
    got = [(r.mem_mib, r.interval_s) for r in pod_readings(samples)]
    assert got == [(200, 1.0), (100, 2.0), (100, 5.0)]
