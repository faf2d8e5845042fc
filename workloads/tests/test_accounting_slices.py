"""Accounting prices MPS slices with the slice count of the GPUs of the node a job ran on, as set per
GPU in the admin, not with the cluster-wide default of 4."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from gpu.choices import SharingMode
from gpu.models import Gpu, Node
from gpu.tests.factories import make_gpus, make_node
from tests.fixtures.personas import World
from workloads.accounting import fair_share_usage, gpu_hours_rows, slice_plan, usage_history
from workloads.choices import JobState
from workloads.models import Job

pytestmark = pytest.mark.django_db


def shared_node(name: str, *slices: int) -> Node:
    node = make_node(name, gpus=len(slices))
    for gpu, count in zip(make_gpus(node, len(slices)), slices, strict=True):
        Gpu.objects.filter(pk=gpu.pk).update(sharing_mode=SharingMode.SHARED, slices=count)
    return node


def ran(world: World, node: str, slices: int = 4, hours: float = 2.0) -> Job:
    """A finished MPS job of alpha that ran `hours` on `node`, ending a minute ago."""
    end = timezone.now() - timedelta(minutes=1)
    return Job.objects.create(
        project=world.alpha,
        owner=world.owner,
        image="x",
        mps_slices=slices,
        node=node,
        state=JobState.SUCCEEDED,
        started_at=end - timedelta(hours=hours),
        finished_at=end,
    )


def hours_of(world: World) -> list[float]:
    return [row["gpu_hours"] for row in gpu_hours_rows(user=world.owner)]


def test_slices_are_priced_with_the_count_of_the_node_they_ran_on(world: World) -> None:
    shared_node("n8", 8, 8)
    ran(world, "n8")
    assert hours_of(world) == [1.0]  # 4 of 8 slices for 2 h, not 4 of 4
    # Summed over its days: run between 00:00 and 02:01 UTC, the job's two hours span midnight.
    days = usage_history(jobs=Job.objects.all(), group="project")
    assert sum(row["gpu_hours"] for row in days) == pytest.approx(1.0, abs=1e-3)
    usage = fair_share_usage(now=timezone.now(), half_life_hours=168.0)
    assert usage.projects["alpha"] == pytest.approx(1.0, rel=1e-3)


def test_a_node_that_left_the_cluster_still_prices_its_jobs(world: World) -> None:
    shared_node("gone", 2)
    Node.objects.filter(name="gone").update(deleted=True)
    ran(world, "gone", slices=1)
    assert hours_of(world) == [1.0]


def test_the_cluster_wide_default_applies_where_the_gpu_is_unknown(world: World) -> None:
    shared_node("mixed", 4, 2)  # which of the two GPUs the job had is not recorded
    ran(world, "mixed")
    ran(world, "")  # never bound to a node
    ran(world, "not-mirrored")
    assert hours_of(world) == [2.0, 2.0, 2.0]
    assert slice_plan() == {}


def test_the_job_api_prices_slices_like_the_export(world: World) -> None:
    from tests.fixtures.personas import api_client

    shared_node("n8", 8, 8)
    job = ran(world, "n8")
    body = api_client(world.owner).get(f"/api/v1/jobs/{job.uid}/").json()
    assert body["gpu_hours"] == pytest.approx(1.0)  # 4 of 8 slices for 2 h, as in the export
