"""Cluster and node streams through the full ASGI app, the real Redis pub/sub layer and real sessions."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest
from asgiref.sync import sync_to_async

from gpu import broadcast, services
from gpu.frames import frame
from gpu.ingest import parse_batch
from gpu.models import Gpu, Node
from gpu.tests.factories import batch, make_gpus, make_node, sample
from gpu.tests.ws import connect, receive_type
from gpu.visibility import HELD_FOR_OTHERS
from tests.fixtures.personas import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


def publish(node: Node, gpus: list[Gpu], specs: list[dict[str, object]]) -> None:
    """What ingest does after commit: push the newest frame of each GPU."""
    now = datetime.now(UTC)
    body = batch(node.name, [sample(g.uuid, now, **s) for g, s in zip(gpus, specs, strict=True)])  # type: ignore[arg-type]
    _, samples = parse_batch(body, now=now)
    frames = [frame(s, g.frame_facts(node.name)) for g, s in zip(gpus, samples, strict=True)]
    broadcast.samples_published(node=node.name, frames=frames)


@pytest.fixture
def cluster(world: World) -> tuple[Node, list[Gpu]]:
    node = make_node("gpu-node-7")
    return node, make_gpus(node, 2)


async def test_anonymous_sockets_are_refused(cluster: tuple[Node, list[Gpu]]) -> None:
    for path in ("/ws/cluster/", "/ws/nodes/gpu-node-7/"):
        communicator, connected = await connect(path, None)
        assert not connected
        await communicator.disconnect()


async def test_an_unknown_node_is_refused(world: World, cluster: tuple[Node, list[Gpu]]) -> None:
    _, connected = await connect("/ws/nodes/no-such-node/", world.admin)
    assert not connected


async def test_operators_see_every_gpu_in_full(world: World, cluster: tuple[Node, list[Gpu]]) -> None:
    node, gpus = cluster
    communicator, connected = await connect("/ws/cluster/", world.admin)
    assert connected
    await receive_type(communicator, "gpu.samples")  # the snapshot
    await sync_to_async(publish)(
        node, gpus, [{"util": 77, "namespace": "gp-beta", "pod": "job-b-0"}, {"util": 5}]
    )
    message = await receive_type(communicator, "gpu.samples")
    first = message["gpus"][gpus[0].uuid]
    assert first["util_gpu"] == 77
    assert first["processes"][0]["pod_name"] == "job-b-0"
    await communicator.disconnect()


async def test_a_user_sees_full_detail_only_for_gpus_running_their_projects(
    world: World, cluster: tuple[Node, list[Gpu]]
) -> None:
    node, gpus = cluster
    communicator, connected = await connect("/ws/nodes/gpu-node-7/", world.member)  # bob, in alpha
    assert connected
    await receive_type(communicator, "gpu.samples")
    specs: list[dict[str, object]] = [
        {"util": 90, "namespace": "gp-alpha", "pod": "job-a-0"},
        {"util": 60, "namespace": "gp-beta", "pod": "job-b-0"},
    ]
    await sync_to_async(publish)(node, gpus, specs)
    message = await receive_type(communicator, "gpu.samples")
    mine, foreign = message["gpus"][gpus[0].uuid], message["gpus"][gpus[1].uuid]
    assert mine["util_gpu"] == 90
    assert [p["pod_name"] for p in mine["processes"]] == ["job-a-0"]
    assert foreign["redacted"] is True
    assert foreign["busy"] is True
    assert "util_gpu" not in foreign
    assert "processes" not in foreign
    await communicator.disconnect()


async def test_a_burst_is_coalesced_to_one_frame_per_second(world: World) -> None:
    # A node of its own: the process-wide publisher keeps per-group token buckets between tests.
    node = await sync_to_async(make_node)("gpu-node-burst")
    gpus = await sync_to_async(make_gpus)(node, 1)
    communicator, connected = await connect("/ws/nodes/gpu-node-burst/", world.admin)
    assert connected
    await receive_type(communicator, "gpu.samples")
    for util in (10, 20, 30, 40):
        await sync_to_async(publish)(node, gpus[:1], [{"util": util}])
        await asyncio.sleep(0.05)
    first = await receive_type(communicator, "gpu.samples")
    t_first = time.monotonic()
    second = await receive_type(communicator, "gpu.samples")
    assert time.monotonic() - t_first >= 0.1  # held back, not sent with the first
    assert first["gpus"][gpus[0].uuid]["util_gpu"] == 10
    assert second["gpus"][gpus[0].uuid]["util_gpu"] == 40  # 20 and 30 were merged away
    assert await communicator.receive_nothing(timeout=1.2)
    await communicator.disconnect()


async def test_the_cluster_view_gets_every_nodes_newest_frames_merged(world: World) -> None:
    """Every node's batch feeds the cluster group: within an interval they merge into one message,
    the newest frame of each GPU of every node in it."""
    nodes = [await sync_to_async(make_node)(f"gpu-node-merge-{i}") for i in range(2)]
    gpus = [(await sync_to_async(make_gpus)(node, 1))[0] for node in nodes]
    communicator, connected = await connect("/ws/cluster/", world.admin)
    assert connected
    await receive_type(communicator, "gpu.samples")
    with pytest.MonkeyPatch.context() as patch:  # the process's publisher holds the cluster group's bucket
        patch.setattr(broadcast, "PUBLISHER", broadcast.Publisher())
        for node_index, util in ((0, 10), (1, 20), (0, 30), (1, 40), (0, 50)):
            await sync_to_async(publish)(nodes[node_index], [gpus[node_index]], [{"util": util}])
            await asyncio.sleep(0.05)
        first = await receive_type(communicator, "gpu.samples")
        second = await receive_type(communicator, "gpu.samples")
        assert await communicator.receive_nothing(timeout=1.2)
    assert first["gpus"][gpus[0].uuid]["util_gpu"] == 10  # at once, not held for the interval
    assert {u: f["util_gpu"] for u, f in second["gpus"].items()} == {gpus[0].uuid: 50, gpus[1].uuid: 40}
    await communicator.disconnect()


async def test_the_embedded_in_memory_layer_also_delivers(world: World) -> None:
    """`make demo` runs one process with the in-memory layer: frames go out on the server's loop."""
    from channels.layers import channel_layers
    from django.test import override_settings

    node = await sync_to_async(make_node)("gpu-node-embedded")
    gpus = await sync_to_async(make_gpus)(node, 1)
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
        channel_layers.backends.clear()
        try:
            communicator, connected = await connect("/ws/nodes/gpu-node-embedded/", world.admin)
            assert connected
            await receive_type(communicator, "gpu.samples")
            await sync_to_async(publish)(node, gpus, [{"util": 66}])
            message = await receive_type(communicator, "gpu.samples")
            assert message["gpus"][gpus[0].uuid]["util_gpu"] == 66
            await communicator.disconnect()
        finally:
            channel_layers.backends.clear()


async def test_a_held_node_is_pushed_live_and_whose_job_only_to_operators(
    world: World, cluster: tuple[Node, list[Gpu]]
) -> None:
    node, _ = cluster
    operator, _ = await connect("/ws/cluster/", world.admin)
    member, _ = await connect("/ws/cluster/", world.member)
    for communicator in (operator, member):
        await receive_type(communicator, "gpu.samples")  # the snapshot
    # Outside a transaction the on-commit push goes at once, as after the cycle's commit.
    assert await sync_to_async(services.node_holds_set)(holds={node.name: "gamma/job-9"}) == 1
    seen = [(await receive_type(c, "node.state"))["nodes"][node.name]["held_for"] for c in (operator, member)]
    assert seen == ["gamma/job-9", HELD_FOR_OTHERS]
    assert await sync_to_async(services.node_holds_set)(holds={}) == 1
    seen = [(await receive_type(c, "node.state"))["nodes"][node.name]["held_for"] for c in (operator, member)]
    assert seen == ["", ""]
    for communicator in (operator, member):
        await communicator.disconnect()
