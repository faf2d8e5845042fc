"""Send the publisher's due group messages to the channel layer together (broadcast.Publisher).

channels_redis's `group_send` on the pub/sub layer is one PUBLISH and one round trip per group, each
behind its shard's lock. A process that ingests telemetry feeds every node's group once a second,
and those sends, one wake-up and one write and read each, took about 0.5 ms of the process's
interpreter per ingested batch (B6, the publisher thread's CPU time), a sixth of the batch itself.

On the pub/sub layer with one Redis (the chart's setting) the due messages go out as one pipeline of
PUBLISHes, encoded with the layer's own serializer, on the channel names its subscribers listen on
(channels_redis 4.3: `<prefix>__group__<group>`, checked against the real layer by
gpu/tests/test_layer_send.py). Any other layer gets its own `group_send`, at most SEND_CONCURRENCY
at once. Delivery stays at-most-once: a failed send is logged and dropped, the next frame follows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, cast

from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import create_pool
from redis import asyncio as aioredis

from gpu.messages import GroupMessage

log = logging.getLogger(__name__)
# Well under a layer's Redis pool (RedisChannelLayer's stops at 100, and each send beyond it failed:
# B7 at 1,000 sockets), which this process's consumers share.
SEND_CONCURRENCY = 32
# A pipeline not sent and answered within this is given up (logged), waiting for its turn included: a
# stalled Redis then holds one connection of this process, and the frames queued behind it are dropped
# after this long instead of piling up, one pipeline per 20 ms hand-off.
PIPELINE_TIMEOUT_S = 5.0

Due = Sequence[tuple[str, GroupMessage]]


class GroupSender:
    """One per publisher event loop: the semaphore and the Redis pool belong to that loop."""

    def __init__(self) -> None:
        self._sending = asyncio.Semaphore(SEND_CONCURRENCY)
        self._pipelining = asyncio.Lock()  # one pipeline at a time, as the layer's own shard lock does
        self._client: tuple[Any, aioredis.Redis] | None = None  # (the layer it was made for, client)

    async def send_all(self, layer: Any, due: Due) -> None:
        try:
            redis = self._pipelined(layer)
            if redis is None:
                await asyncio.gather(*(self._one(layer, group, message) for group, message in due))
                return
            pipe = redis.pipeline(transaction=False)
            for group, message in due:
                pipe.publish(f"{layer.prefix}__group__{group}", layer.serialize(message))
            async with asyncio.timeout(PIPELINE_TIMEOUT_S), self._pipelining:  # the wait for the lock too
                await pipe.execute()
        except Exception:  # a dead Redis must not kill the publisher; the next frame retries
            log.exception("sending %d group message(s) failed", len(due))

    async def _one(self, layer: Any, group: str, message: GroupMessage) -> None:
        async with self._sending:
            try:
                await layer.group_send(group, cast("dict[str, Any]", message))
            except Exception:
                log.exception("group_send to %s failed", group)

    def _pipelined(self, layer: Any) -> aioredis.Redis | None:
        """A Redis client for the layer's one host, or None where messages go one by one."""
        if not isinstance(layer, RedisPubSubChannelLayer):
            return None
        if self._client is not None and self._client[0] is layer:
            return self._client[1]
        shards = layer._shards  # the hosts it was configured with, decoded (4.3)
        if len(shards) != 1:  # sharded by channel name: leave the choice of host to the layer
            return None
        redis = aioredis.Redis(connection_pool=create_pool(shards[0].host))
        self._client = (layer, redis)  # one layer per process; a test that swaps layers gets a new one
        return redis
