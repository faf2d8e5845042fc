"""The blocking log reads (one-shot reads and the WSGI fallback of a followed log)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fixtures.personas import World
from workloads.k8s.client import set_client
from workloads.k8s.errors import K8sError
from workloads.logs import log_lines
from workloads.models import Job
from workloads.tests.fakes import FakeKube
from workloads.tests.test_log_follow import FAST, _running_job

pytestmark = pytest.mark.django_db
CREATING = 'container "main" in pod "p" is waiting to start: ContainerCreating'


class StartingContainer(FakeKube):
    """pods/log answers 400 while the container is being created (as the real kubelet does)."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals

    def stream(self, path: str, query: dict[str, str] | None = None, timeout: float = 330) -> Iterator[bytes]:
        if self.refusals:
            self.refusals -= 1
            raise K8sError(400, CREATING)
        yield from super().stream(path, query, timeout)

    def read_bytes(self, path: str, query: dict[str, str] | None = None) -> bytes:
        raise K8sError(400, CREATING)


def _job_with_log(world: World, kube: FakeKube) -> Job:
    job = _running_job(world)
    kube.logs[f"/api/v1/namespaces/{job.namespace}/pods/{job.pod_name}/log"] = b"one\ntwo\n"
    Job.objects.filter(pk=job.pk).update(log_tail="kept")
    job.refresh_from_db()
    return job


@FAST
def test_a_followed_log_waits_for_its_container_to_start(jobs_world: World, fake_kube: FakeKube) -> None:
    kube = StartingContainer(refusals=2)
    set_client(kube)  # the fake_kube fixture puts the client back after
    job = _job_with_log(jobs_world, kube)
    assert b"".join(log_lines(job, follow=True)) == b"one\ntwo\n"
    assert kube.refusals == 0


@FAST
def test_a_one_shot_read_does_not_wait_and_serves_the_kept_tail(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    kube = StartingContainer(refusals=0)
    set_client(kube)  # the fake_kube fixture puts the client back after
    assert b"".join(log_lines(_job_with_log(jobs_world, kube), follow=False)) == b"kept"
