"""The live push's publisher (gpu/broadcast.py) against the real Redis channel layers: every group's
frame arrives, tenant namespaces get only their processes, a Redis outage costs frames but never the
caller's time or the publisher, and what waits for a slow Redis waits merged, one message per group.
(A view's one frame a second, newest frame per GPU, is checked through the websockets in
test_consumers.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, cast

import pytest
from channels_redis.core import RedisChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from gpu import broadcast
from gpu.messages import GpuFrame, ProcessFrame, SamplesMessage
from gpu.tests.redis_proxy import RedisProxy

Receive = Callable[..., Awaitable[dict[str, Any]]]


def _labelled(label: str, util: int = 0) -> SamplesMessage:
    """A message that says which send it was: one frame, keyed by `label`."""
    frame = cast("GpuFrame", {"uuid": label, "util_gpu": util})
    return SamplesMessage(type="gpu.samples", gpus={label: frame}, sent_at=0.0)


def _prefix() -> str:
    return f"test-push-{uuid.uuid4().hex[:8]}"


@contextlib.asynccontextmanager
async def _subscribed(prefix: str, groups: Iterable[str]) -> AsyncIterator[Receive]:
    """One channel of a pub/sub layer straight on the test Redis, in every one of `groups`."""
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix=prefix)
    channel = await layer.new_channel()
    for group in groups:
        await layer.group_add(group, channel)

    async def receive(timeout: float = 10.0) -> dict[str, Any]:
        message: dict[str, Any] = await asyncio.wait_for(layer.receive(channel), timeout)
        return message

    try:
        yield receive
    finally:
        await layer.flush()


def _failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gpu.broadcast"]


async def _until(done: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def test_every_group_reaches_the_pub_sub_layers_subscribers(monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, groups = _prefix(), [broadcast.node_group(f"every-{i}") for i in range(300)]
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix=prefix)
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    async with _subscribed(prefix, groups) as receive:
        publisher = broadcast.Publisher()
        for group in groups:
            publisher.publish(group, _labelled(group))
        received = [await receive() for _ in groups]
    assert sorted(label for m in received for label in m["gpus"]) == sorted(groups)
    assert all(m["sent_at"] > 0 for m in received)  # stamped when handed to the layer (push-lag metric)


def test_every_group_reaches_a_real_redis_channel_layer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The other Redis layer, whose connection pool stops at 100: 300 groups due at once all go out."""
    layer = RedisChannelLayer(hosts=[settings.REDIS_URL], prefix=_prefix())
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    sent: list[str] = []
    original = layer.group_send

    async def counted(group: str, message: dict[str, Any]) -> None:
        await original(group, message)
        sent.append(group)

    monkeypatch.setattr(layer, "group_send", counted)
    publisher = broadcast.Publisher()
    with caplog.at_level(logging.ERROR, logger="gpu.broadcast"):
        for i in range(300):
            publisher.publish(broadcast.node_group(f"core-{i}"), _labelled(str(i)))
        asyncio.run(_until(lambda: len(sent) + len(_failures(caplog)) >= 300, seconds=30))
    assert not _failures(caplog)[:3]
    assert len(sent) == 300


@pytest.mark.parametrize("outage", ["cut", "stall"])
async def test_a_redis_outage_is_logged_and_the_next_frame_follows(
    outage: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis refusing connections (cut) or hanging (stall): the caller returns at once, the frame of
    the outage is logged and dropped (at-most-once: never sent later), and the next frame after it
    arrives, once, through the same layer."""
    monkeypatch.setattr(broadcast, "SEND_TIMEOUT_S", 0.5)
    proxy = RedisProxy(settings.REDIS_URL)
    prefix, groups = _prefix(), ["gpu.node.before", "gpu.node.during", "gpu.node.after"]
    layer = RedisPubSubChannelLayer(hosts=[proxy.url], prefix=prefix)
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    publisher = broadcast.Publisher()
    try:
        async with _subscribed(prefix, groups) as receive:
            publisher.publish("gpu.node.before", _labelled("before"))
            assert list((await receive())["gpus"]) == ["before"]
            getattr(proxy, outage)()
            with caplog.at_level(logging.ERROR, logger="gpu.broadcast"):
                started = time.monotonic()
                publisher.publish("gpu.node.during", _labelled("during"))
                assert time.monotonic() - started < 0.1  # handed over, not sent by the caller
                await _until(lambda: "group_send to gpu.node.during failed" in caplog.text)
            assert "group_send to gpu.node.during failed" in caplog.text
            proxy.restore()
            publisher.publish("gpu.node.after", _labelled("after"))
            assert list((await receive())["gpus"]) == ["after"]
            with pytest.raises(TimeoutError):  # neither "during" nor a second "after"
                await receive(timeout=1.5)
    finally:
        proxy.close()


async def test_tenant_namespaces_get_only_their_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = _prefix()
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix=prefix)
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(broadcast, "PUBLISHER", broadcast.Publisher())

    def process(pid: int, namespace: str | None) -> ProcessFrame:
        # Every field of the contract's process sample, as a frame carries it; two of them typed.
        fields = {
            "pid": pid,
            "mem_used_mib": 1,
            "pod_namespace": namespace,
            "pod_name": f"p{pid}",
            "container": "c",
        }
        return cast("ProcessFrame", fields)

    def frame(uuid_: str, processes: list[ProcessFrame]) -> GpuFrame:
        return cast("GpuFrame", {"uuid": uuid_, "node": "ns-node", "processes": processes})

    shared = frame("GPU-shared", [process(1, "gp-red"), process(2, "gp-blue"), process(3, None)])
    blue = frame("GPU-blue", [process(4, "gp-blue")])
    async with (
        _subscribed(prefix, [broadcast.namespace_group("gp-red")]) as red_receive,
        _subscribed(prefix, [broadcast.namespace_group("gp-blue")]) as blue_receive,
    ):
        broadcast.samples_published(node="ns-node", frames=[shared, blue])
        red, blue_message = await red_receive(), await blue_receive()
    assert {u: [p["pid"] for p in f["processes"]] for u, f in red["gpus"].items()} == {"GPU-shared": [1]}
    assert {u: [p["pid"] for p in f["processes"]] for u, f in blue_message["gpus"].items()} == {
        "GPU-shared": [2],
        "GPU-blue": [4],
    }


class _HeldLayer:
    """A layer whose first send waits until released; records every send."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.sent.append((group, {u: f["util_gpu"] for u, f in message["gpus"].items()}))
        if len(self.sent) == 1:
            await asyncio.to_thread(self.release.wait, 10)


def test_what_waits_for_a_slow_send_waits_merged_one_message_per_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Memory stays flat while Redis is slow: a group's later frames merge into its waiting message
    (newest frame per GPU wins) instead of queueing one message per batch."""
    layer = _HeldLayer()
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    publisher = broadcast.Publisher()
    publisher.publish("gpu.node.first", _labelled("first"))  # holds the sender
    groups = [f"gpu.node.held-{g}" for g in range(3)]
    for util in range(50):
        for group in groups:
            message = _labelled(f"{group}/gpu-{util % 2}", util)
            publisher.publish(group, message)
    # Every hand-over above is on the publisher's loop before this runs (its callbacks run in order).
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), publisher._started().loop).result(timeout=10)
    layer.release.set()
    asyncio.run(_until(lambda: len(layer.sent) >= 1 + len(groups)))
    time.sleep(0.3)  # nothing more follows
    assert layer.sent[1:] == [(group, {f"{group}/gpu-0": 48, f"{group}/gpu-1": 49}) for group in groups]


def test_a_malformed_message_does_not_stop_the_publisher(monkeypatch: pytest.MonkeyPatch) -> None:
    layer = _HeldLayer()
    layer.release.set()
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    publisher = broadcast.Publisher()
    publisher.publish("gpu.node.bad", cast("SamplesMessage", {"gpus": {}}))  # no type
    publisher.publish("gpu.node.good", _labelled("good"))
    asyncio.run(_until(lambda: bool(layer.sent), seconds=3))
    assert layer.sent == [("gpu.node.good", {"good": 0})]


def test_an_outage_is_one_log_line_not_one_per_send(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class DeadLayer:
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            raise ConnectionError("Redis is away")

    monkeypatch.setattr(broadcast, "get_channel_layer", DeadLayer)
    publisher = broadcast.Publisher()
    with caplog.at_level(logging.ERROR, logger="gpu.broadcast"):
        for i in range(50):
            publisher.publish(f"gpu.node.dead-{i}", _labelled(str(i)))
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0.5), publisher._started().loop).result(timeout=10)
    assert len(_failures(caplog)) == 1
