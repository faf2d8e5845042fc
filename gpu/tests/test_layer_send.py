"""The publisher's sends (gpu/layer_send.py, gpu/broadcast.py): due groups go out together, in one
pipeline on the real Redis pub/sub layer, and a burst of ingested batches wakes the publisher thread
at most once per HANDOFF_S instead of once per batch (B6: about 0.5 ms of the interpreter a batch)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from gpu import broadcast, layer_send
from gpu.messages import GroupMessage, SamplesMessage


def _message(i: int) -> SamplesMessage:
    return SamplesMessage(type="gpu.samples", gpus={}, sent_at=float(i))


async def _received(layer: RedisPubSubChannelLayer, groups: int) -> list[dict[str, Any]]:
    """Subscribe one channel to `groups` groups, send to all in one call, read what arrived."""
    channel = await layer.new_channel()
    for i in range(groups):
        await layer.group_add(f"send-{i}", channel)
    await layer_send.GroupSender().send_all(layer, [(f"send-{i}", _message(i)) for i in range(groups)])
    out = [await asyncio.wait_for(layer.receive(channel), timeout=5) for _ in range(groups)]
    await layer.flush()
    return out


def test_a_pipeline_reaches_the_real_pubsub_layers_subscribers() -> None:
    layer = RedisPubSubChannelLayer(hosts=[settings.REDIS_URL], prefix="test-send")
    received = asyncio.run(_received(layer, 50))
    assert sorted(m["sent_at"] for m in received) == [float(i) for i in range(50)]
    assert {m["type"] for m in received} == {"gpu.samples"}


def test_a_dead_redis_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    layer = RedisPubSubChannelLayer(hosts=["redis://127.0.0.1:1/0"], prefix="test-send")
    with caplog.at_level(logging.ERROR, logger="gpu.layer_send"):
        asyncio.run(layer_send.GroupSender().send_all(layer, [("send-0", _message(0))]))
    assert "sending 1 group message(s) failed" in caplog.text


def _until(done: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_burst_wakes_the_publisher_once_per_handoff(monkeypatch: pytest.MonkeyPatch) -> None:
    sends: list[int] = []
    groups: set[str] = set()

    async def send_all(self: layer_send.GroupSender, layer: Any, due: list[tuple[str, GroupMessage]]) -> None:
        burst = {group for group, _ in due if group.startswith("gpu.node.burst-")}
        if burst:  # not a frame of an earlier test, sent late by the process's publisher
            sends.append(len(burst))
            groups.update(burst)

    monkeypatch.setattr(layer_send.GroupSender, "send_all", send_all)
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: object())
    publisher = broadcast.Publisher()
    started = time.monotonic()
    for i in range(100):  # 100 nodes' batches, a millisecond apart, each its own group
        publisher.publish(broadcast.node_group(f"burst-{i}"), _message(i))
        time.sleep(0.001)
    elapsed = time.monotonic() - started
    _until(lambda: len(groups) == 100)
    assert len(groups) == 100
    # Each wake-up comes at least HANDOFF_S after the one before and sends every group it found due.
    assert len(sends) <= elapsed / broadcast.HANDOFF_S + 2, (len(sends), elapsed)


def test_a_stalled_redis_holds_one_connection_and_gives_up(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that accepts but never answers: the pipelines wait their turn on one connection and
    are given up after PIPELINE_TIMEOUT_S, instead of a new connection per hand-off."""
    accepted: list[socket.socket] = []
    server = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:  # and never answer
        with contextlib.suppress(OSError):  # the server closed at the end
            while True:
                accepted.append(server.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    monkeypatch.setattr(layer_send, "PIPELINE_TIMEOUT_S", 0.5)
    layer = RedisPubSubChannelLayer(
        hosts=[f"redis://127.0.0.1:{server.getsockname()[1]}/0"], prefix="test-send"
    )

    async def five_hand_offs() -> None:
        sender = layer_send.GroupSender()
        await asyncio.gather(*(sender.send_all(layer, [(f"send-{i}", _message(i))]) for i in range(5)))

    try:
        with caplog.at_level(logging.ERROR, logger="gpu.layer_send"):
            asyncio.run(asyncio.wait_for(five_hand_offs(), timeout=10))
    finally:
        server.close()
    assert caplog.text.count("sending 1 group message(s) failed") == 5
    # One at a time: the first pipeline's, and at most one more whose turn came as the first was given
    # up (all five started together); a connection per hand-off would be five.
    assert len(accepted) <= 2


def test_a_bad_hand_off_does_not_strand_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    original = broadcast.Coalescer.offer_all

    def offer_all(self: broadcast.Coalescer, messages: Any) -> None:
        if any(group == "gpu.node.bad" for group, _ in messages):
            raise ValueError("a malformed message")
        original(self, messages)

    async def send_all(self: layer_send.GroupSender, layer: Any, due: list[tuple[str, GroupMessage]]) -> None:
        sent.extend(group for group, _ in due if group == "gpu.node.good")

    monkeypatch.setattr(broadcast.Coalescer, "offer_all", offer_all)
    monkeypatch.setattr(layer_send.GroupSender, "send_all", send_all)
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: object())
    publisher = broadcast.Publisher()
    publisher.publish("gpu.node.warm", _message(0))  # the first hand-off drains at once; the next two wait
    publisher.publish("gpu.node.bad", _message(1))
    publisher.publish("gpu.node.good", _message(2))
    _until(lambda: sent == ["gpu.node.good"], seconds=3)
    assert sent == ["gpu.node.good"]
