"""CPU and memory through the database path (fake cluster): the project's Quota and each node's
allocatable reach the queue, and a job over the CPU headroom stays queued with the numbers. The
real-cluster version is tests/workloads_e2e/test_queue_resources.py."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from accounts.models import Quota, User
from tests.fixtures.personas import World
from workloads.admission.cycle import admission_cycle
from workloads.admission.live import LiveCluster, Reserved, node_states
from workloads.admission.state import cluster_state
from workloads.choices import JobState
from workloads.k8s.quantity import mebibytes, millicores
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE
from workloads.tests.fakes import FakeKube, fake_node


def submit(user: User, project: Any, **spec: Any) -> Job:
    return services.job_submit(actor=user, project=project, data={"image": IMAGE, "gpus": 1, **spec})


@pytest.mark.parametrize(
    ("text", "cores"), [("500m", 500), ("2", 2000), ("1.5", 1500), ("0.0001", 1), ("1e1", 10_000), ("x", 0)]
)
def test_cpu_quantities_read_as_millicores(text: str, cores: int) -> None:
    assert millicores(text) == cores


def test_memory_quantities_read_as_mib_rounded_so_free_is_never_overstated() -> None:
    assert mebibytes("512Gi") == 524_288
    assert mebibytes("131072Ki") == 128
    assert mebibytes("1G") == 953
    assert mebibytes("1G", up=True) == 954
    assert mebibytes(None) == 0


def _pod(node: str, cpu: str, memory: str) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, "nvidia.com/gpu": "1"}
    return {
        "metadata": {"name": "p", "labels": {}},
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": requests}}]},
        "status": {"phase": "Running"},
    }


def test_node_cpu_and_memory_free_are_allocatable_minus_pods_and_reservations() -> None:
    roomy = fake_node("n1", gpus=4, slices=0)
    roomy["status"]["allocatable"].update({"cpu": "8", "memory": "32Gi"})
    live = LiveCluster(nodes=[roomy, fake_node("n2", gpus=4, slices=0)], pods=[_pod("n1", "500m", "1Gi")])
    n1, n2 = node_states(live, reserved={"n1": Reserved(1, 0, 2000, 1024)}, slices_per_gpu=4)
    assert (n1.free_gpus, n1.free_cpu_millicores, n1.free_memory_mib) == (2, 5500, 30_720)
    assert (n2.free_cpu_millicores, n2.free_memory_mib) == (None, None)  # not advertised: not modelled


@pytest.mark.django_db
def test_the_projects_cpu_and_memory_quota_reach_the_queue(world: World) -> None:
    Quota.objects.filter(project=world.alpha).update(cpu_millicores=4000, memory_mib=8192)
    quotas = cluster_state(now=timezone.now(), live=LiveCluster(nodes=[], pods=[])).quotas
    assert (quotas["alpha"].cpu_millicores, quotas["alpha"].memory_mib) == (4000, 8192)


@pytest.mark.django_db
def test_a_job_over_the_cpu_headroom_stays_queued_with_the_reason(
    jobs_world: World, fake_kube: FakeKube
) -> None:
    fake_kube.nodes = [fake_node("n0", gpus=4)]
    Quota.objects.filter(project=jobs_world.alpha).update(gpus=4, cpu_millicores=4000)
    first = submit(jobs_world.owner, jobs_world.alpha, cpu_millicores=3000)
    second = submit(jobs_world.owner, jobs_world.alpha, cpu_millicores=2000)
    assert admission_cycle() == [first.pk]
    second.refresh_from_db()
    assert second.state == JobState.QUEUED
    assert second.queue_explanation["code"] == "quota_cpu"
    assert (
        second.queue_explanation["sentence"] == "waiting for CPU: needs 2000m, 1000m of 4000m free in alpha"
    )
