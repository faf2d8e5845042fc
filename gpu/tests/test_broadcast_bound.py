"""The publisher keeps at most SEND_CONCURRENCY (gpu/layer_send.py) group sends in flight on a layer
that sends one group at a time: every group fires within one interval, and 1,000 node groups at once
overran the Redis channel layer's connection pool (100), losing the frames beyond it (B7 at 1,000
sockets)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from gpu import broadcast, layer_send
from gpu.messages import SamplesMessage

GROUPS = 300  # three times the Redis pool, so an unbounded publisher cannot pass


def _publish_all(publisher: broadcast.Publisher) -> None:
    for i in range(GROUPS):
        message = SamplesMessage(type="gpu.samples", gpus={}, sent_at=0.0)
        publisher.publish(broadcast.node_group(f"bound-{i}"), message)


def _until(done: Callable[[], bool], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_sends_in_flight_never_pass_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    state = {"now": 0, "peak": 0}
    delivered: list[str] = []

    class SlowLayer:
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            await asyncio.sleep(0.01)
            state["now"] -= 1
            if "bound-" in group:  # not an earlier test's frame, sent late by the process's publisher
                delivered.append(group)

    monkeypatch.setattr(broadcast, "get_channel_layer", SlowLayer)
    _publish_all(broadcast.Publisher())
    _until(lambda: len(delivered) == GROUPS)
    assert len(delivered) == GROUPS
    assert state["peak"] <= layer_send.SEND_CONCURRENCY


def test_every_group_reaches_a_real_redis_channel_layer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    layer = RedisChannelLayer(hosts=[settings.REDIS_URL], prefix="test-bound")
    monkeypatch.setattr(broadcast, "get_channel_layer", lambda: layer)
    sent: list[str] = []
    original = layer.group_send

    async def counted(group: str, message: dict[str, Any]) -> None:
        await original(group, message)
        if "bound-" in group:  # the process's own publisher may still send an earlier test's frame here
            sent.append(group)

    monkeypatch.setattr(layer, "group_send", counted)
    with caplog.at_level(logging.ERROR, logger="gpu.broadcast"):
        _publish_all(broadcast.Publisher())
        _until(lambda: len(sent) + len(caplog.records) >= GROUPS)
    assert not [r.getMessage() for r in caplog.records][:3]  # e.g. "group_send to ... failed"
    assert len(sent) == GROUPS
