"""ws/jobs/<uid>/telemetry/: a job's own GPUs and processes, for its project's members only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async

from gpu import broadcast
from gpu.frames import frame
from gpu.ingest import parse_batch
from gpu.models import Gpu, Node
from gpu.tests.factories import batch, make_gpus, make_node, sample
from gpu.tests.ws import connect, receive_type
from tests.fixtures.personas import World
from workloads.models import Job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest.fixture
def running(world: World) -> tuple[Job, Node, list[Gpu]]:
    node = make_node("gpu-node-9")
    job = Job.objects.create(project=world.alpha, owner=world.member, image="pytorch", gpus=1, node=node.name)
    return job, node, make_gpus(node, 2)


def publish(node: Node, gpus: list[Gpu], pods: list[tuple[str, str]]) -> None:
    now = datetime.now(UTC)
    raw = [
        sample(g.uuid, now, namespace=ns, pod=pod, util=70) for g, (ns, pod) in zip(gpus, pods, strict=True)
    ]
    _, samples = parse_batch(batch(node.name, raw), now=now)
    frames = [frame(s, g.frame_facts(node.name)) for g, s in zip(gpus, samples, strict=True)]
    broadcast.samples_published(node=node.name, frames=frames)


async def test_members_see_only_their_jobs_gpus_and_processes(
    world: World, running: tuple[Job, Node, list[Gpu]]
) -> None:
    job, node, gpus = running
    communicator, connected = await connect(f"/ws/jobs/{job.uid}/telemetry/", world.owner)
    assert connected
    await receive_type(communicator, "gpu.samples")
    pods = [("gp-alpha", f"job-{job.uid}-x7k2p"), ("gp-alpha", "job-someone-else-0")]
    await sync_to_async(publish)(node, gpus, pods)
    message = await receive_type(communicator, "gpu.samples")
    assert list(message["gpus"]) == [gpus[0].uuid]
    assert [p["pod_name"] for p in message["gpus"][gpus[0].uuid]["processes"]] == [pods[0][1]]
    await communicator.disconnect()


async def test_a_foreign_jobs_channel_is_refused(world: World, running: tuple[Job, Node, list[Gpu]]) -> None:
    job, _, _ = running
    _, connected = await connect(f"/ws/jobs/{job.uid}/telemetry/", world.outsider)
    assert not connected
    _, connected = await connect(f"/ws/jobs/{uuid.uuid4()}/telemetry/", world.owner)
    assert not connected
    _, connected = await connect(f"/ws/jobs/{job.uid}/telemetry/", None)
    assert not connected


async def test_operators_may_watch_any_job(world: World, running: tuple[Job, Node, list[Gpu]]) -> None:
    job, _, _ = running
    communicator, connected = await connect(f"/ws/jobs/{job.uid}/telemetry/", world.admin)
    assert connected
    await communicator.disconnect()
