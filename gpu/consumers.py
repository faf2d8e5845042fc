"""Live GPU streams over websockets: one consumer per stream, so each stream is authorised in one place.

Each consumer authorises in `connect()` (anonymous sockets are refused; unknown objects are
refused), joins one group named by a broadcast.py function, sends a snapshot from the database, and
then forwards `gpu.samples` / `node.state` messages as they come: gpu/broadcast.py has already
coalesced them to about one a second per group. These consumers are async, unlike the sync consumers
preferred elsewhere, because a sync consumer runs every handler on the one thread Channels keeps
for sync code, where the frames of a thousand sockets would queue behind each other; the ORM is
reached via database_sync_to_async.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from channels.db import database_sync_to_async

from accounts.live import LiveConsumer, user_group
from accounts.models import User
from gpu import broadcast, metrics, selectors
from gpu.messages import GpuFrame, GroupMessage, NodeStateMessage, SamplesMessage
from gpu.visibility import redact_all, redact_node

CLOSE_UNAUTHORISED = 4403


class LiveGpuConsumer(LiveConsumer):
    """Shared life cycle; subclasses say who may connect, which group, and what a snapshot holds."""

    stream: ClassVar[str] = "gpu"
    group: str = ""
    namespaces: frozenset[str] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if not isinstance(user, User) or not user.is_authenticated or not user.is_active:
            await self.close(code=CLOSE_UNAUTHORISED)
            return
        recheck = await self.start_recheck(user)
        if recheck is None:
            await self.close(code=CLOSE_UNAUTHORISED)
            return
        self.user, self.recheck = user, recheck
        self.namespaces = await database_sync_to_async(selectors.user_namespaces, thread_sensitive=False)(
            user=user
        )
        group = await self.authorise()
        if group is None:
            await self.close(code=CLOSE_UNAUTHORISED)
            return
        self.group = group
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.channel_layer.group_add(user_group(user.pk), self.channel_name)
        await self.accept()
        # Not thread-sensitive: snapshots of many sockets connecting at once run in parallel instead of
        # queueing on the one shared sync thread (they only read, each thread has its own connection).
        for message in await database_sync_to_async(self.snapshot, thread_sensitive=False)():
            await self._emit(message)

    async def disconnect(self, code: int) -> None:
        if self.group:
            self.recheck.stop()
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.channel_layer.group_discard(user_group(self.user.pk), self.channel_name)

    async def session_revoked(self, event: dict[str, Any]) -> None:
        """The user's access changed: close; the page reconnects with what they may see now."""
        await self.close_unauthorised()

    async def authorise(self) -> str | None:
        """The group to join, or None to refuse the socket."""
        raise NotImplementedError

    def snapshot(self) -> list[GroupMessage]:
        return []

    def visible(self, gpus: dict[str, GpuFrame]) -> dict[str, GpuFrame]:
        """Which frames of a message belong on this stream (before redaction)."""
        return gpus

    async def gpu_samples(self, event: SamplesMessage) -> None:
        gpus = self.visible(event["gpus"])
        if gpus:
            await self._emit(SamplesMessage(type="gpu.samples", gpus=gpus, sent_at=event["sent_at"]))

    async def node_state(self, event: NodeStateMessage) -> None:
        await self._emit(event)

    async def _emit(self, message: GroupMessage) -> None:
        if self.recheck.gone():
            return
        if message["sent_at"]:
            metrics.pushed(lag_s=time.time() - message["sent_at"])
        payload: dict[str, Any] = dict(message)
        if message["type"] == "gpu.samples":
            payload["gpus"] = redact_all(message["gpus"], self.namespaces)
        else:
            payload["nodes"] = {n: redact_node(f, self.namespaces) for n, f in message["nodes"].items()}
        await self.send_json(payload)


class ClusterConsumer(LiveGpuConsumer):
    """ws/cluster/: every GPU of the cluster (redacted for non-operators)."""

    async def authorise(self) -> str | None:
        return broadcast.cluster_group()

    def snapshot(self) -> list[GroupMessage]:
        return _snapshot(list(selectors.node_list()))


class NodeConsumer(LiveGpuConsumer):
    """ws/nodes/<name>/: one node's GPUs (redacted for non-operators); unknown nodes are refused."""

    async def authorise(self) -> str | None:
        name = str(self.scope["url_route"]["kwargs"]["name"])
        exists = await database_sync_to_async(_node_exists, thread_sensitive=False)(name)
        self.node_name = name
        return broadcast.node_group(name) if exists else None

    def snapshot(self) -> list[GroupMessage]:
        return _snapshot(list(selectors.node_list().filter(name=self.node_name)))


def _node_exists(name: str) -> bool:
    return selectors.node_list().filter(name=name).exists()


def _snapshot(nodes: list[Any]) -> list[GroupMessage]:
    gpus = list(selectors.gpu_list().filter(node__in=nodes))
    return [
        NodeStateMessage(
            type="node.state", nodes={n.name: broadcast.node_frame(n) for n in nodes}, sent_at=0.0
        ),
        SamplesMessage(type="gpu.samples", gpus=selectors.latest_frames(gpus=gpus), sent_at=0.0),
    ]
