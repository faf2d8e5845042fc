"""The only sender of gpu messages, so naming and throttling live in one place: group names, frames,
and the live push's one coalescing stage.

The path after commit: the caller (sync code: the ingest view in a worker thread, Celery tasks,
admin actions) hands the group messages to this process's publisher thread and returns; there a
`Coalescer` holds, per group and message type, a token bucket and the message waiting for its token
(newer frames merged in, newest frame per GPU wins), and one sender coroutine passes what is due to
the channel layer's `group_send`, one message at a time. Consumers forward what arrives as it is.

Why each piece (measured side by side in docs/benchmarks/live-push.md):
- The coalescing is on the publisher's side because there it is paid once per group, not once per
  socket: the cluster group is fed by every node's batch (1,000 messages a second at 1,000 nodes),
  which a per-socket throttle would receive, decode and merge on every cluster socket; merged here, it
  is about one message a second from each publishing process. The node groups pass as they are
  (one batch a second), so a node or job view gets its frames about once a second; a cluster view
  fed by several web replicas gets one message per replica and interval, each with the GPUs that
  replica ingested.
- The thread: `group_send` is a coroutine, and `async_to_sync` from a thread that has no event loop
  runs it on a loop of its own, which the pub/sub layer gives a Redis connection of its own, per
  call; the publisher's one loop keeps one connection and costs the caller a hand-off.
- One message at a time: the pub/sub layer publishes one message at a time per process anyway,
  and a sender that waits keeps what waits merged per group, so memory stays flat when Redis is
  slow. A send that fails or takes longer than SEND_TIMEOUT_S is logged and dropped, never retried:
  delivery is at-most-once like every channel layer, the next frame follows, and pages resync from
  the database on (re)connect.

Embedded mode (one process, `make demo`) uses the in-memory layer, whose queues belong to the
server's event loop: messages are sent there at once (from a request thread `async_to_sync` goes back
to it), not coalesced; each GPU's frame comes once per agent batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from gpu import app_settings
from gpu.messages import GpuFrame, GroupMessage, NodeFrame, NodeStateMessage, SamplesMessage

log = logging.getLogger(__name__)
# A send not answered within this is given up: a stalled Redis holds the sender this long per
# message, while newer frames wait merged, one per group.
SEND_TIMEOUT_S = 5.0
# During an outage every send fails: one log line (with the count since the last) per this many seconds.
FAILURE_LOG_EVERY_S = 10.0

Slot = tuple[str, str]  # (group, message type)
# Must not raise: it logs and drops what fails, so the one sender coroutine runs for good.
Send = Callable[[str, GroupMessage], Awaitable[None]]


def cluster_group() -> str:
    return "gpu.cluster"


def _safe(name: str) -> str:
    # Group names: ASCII letters, digits, '-', '_', '.', under 100 characters.
    return name if len(name) <= 80 else hashlib.sha256(name.encode()).hexdigest()[:40]


def node_group(name: str) -> str:
    return f"gpu.node.{_safe(name)}"


def namespace_group(namespace: str) -> str:
    return f"gpu.ns.{_safe(namespace)}"


def merge(old: GroupMessage | None, new: GroupMessage) -> GroupMessage:
    """Newest frame per GPU (or node) wins; the waiting message is updated in place."""
    if old is None or old["type"] != new["type"]:
        return new
    if old["type"] == "gpu.samples" and new["type"] == "gpu.samples":
        old["gpus"].update(new["gpus"])
    elif old["type"] == "node.state" and new["type"] == "node.state":
        old["nodes"].update(new["nodes"])
    return old


class Coalescer:
    """Per group and message type: a token bucket, the message waiting for its token, one sender.

    The bucket holds BURST tokens and refills at REFILL tokens per `interval`. A 1 Hz source (an agent
    batch per second) passes without waiting even with jitter, where a plain "1 s since the last send"
    throttle would hold a slightly early frame for almost a second. The refill is a bit faster than
    one per interval on purpose: at exactly the source's rate, the deficit left by one late-then-early
    pair of batches would never drain and would become a permanent lag (measured: ~400 ms behind for
    good). A faster source is merged down to at most REFILL frames per interval (newest frame per GPU
    wins), which is what bounds the cluster view fed by every node.

    Runs on one event loop: `offer` is called there, `run` is its one sender.
    """

    BURST = 1.5
    REFILL = 1.25

    def __init__(self, interval: float, send: Send, loop: asyncio.AbstractEventLoop) -> None:
        self.interval, self.send, self.loop = interval, send, loop
        self._waiting: dict[Slot, GroupMessage] = {}  # offered, not yet sent: merged until then
        self._bucket: dict[Slot, tuple[float, float]] = {}  # slot -> (tokens, at)
        self._due: deque[Slot] = deque()  # waiting slots whose token has come, in that order
        self._wake = asyncio.Event()

    def _tokens(self, slot: Slot) -> float:
        now = self.loop.time()
        tokens, at = self._bucket.get(slot, (self.BURST, now))
        if self.interval <= 0:
            return self.BURST
        return min(self.BURST, tokens + (now - at) * self.REFILL / self.interval)

    def offer(self, group: str, message: GroupMessage) -> None:
        slot = (group, message["type"])
        if slot in self._waiting:  # its token or the sender is on its way
            self._waiting[slot] = merge(self._waiting[slot], message)
            return
        self._waiting[slot] = message
        wait = (1.0 - self._tokens(slot)) * self.interval / self.REFILL
        if wait > 0:
            self.loop.call_later(wait, self._make_due, slot)
        else:
            self._make_due(slot)

    def offer_all(self, messages: Sequence[tuple[str, GroupMessage]]) -> None:
        for group, message in messages:
            self.offer(group, message)

    def _make_due(self, slot: Slot) -> None:
        self._due.append(slot)
        self._wake.set()

    async def run(self) -> None:
        """Send what is due, one message at a time, for good."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._due:
                slot = self._due.popleft()
                message = self._waiting.pop(slot)
                self._bucket[slot] = (max(0.0, self._tokens(slot) - 1.0), self.loop.time())
                await self.send(slot[0], message)  # never raises: `_send` logs and drops a failure


class _FailureLog:
    """Failed sends, logged at most once per FAILURE_LOG_EVERY_S (an outage fails every send)."""

    def __init__(self) -> None:
        self.unlogged = 0
        self.logged_at = float("-inf")

    def failed(self, group: str) -> None:
        self.unlogged += 1
        now = time.monotonic()
        if now - self.logged_at >= FAILURE_LOG_EVERY_S:
            log.exception(
                "group_send to %s failed (%d failed sends since the last report)", group, self.unlogged
            )
            self.unlogged, self.logged_at = 0, now


async def _send(group: str, message: GroupMessage, failures: _FailureLog) -> None:
    message["sent_at"] = time.time()
    try:
        async with asyncio.timeout(SEND_TIMEOUT_S):
            await get_channel_layer().group_send(group, cast("dict[str, Any]", message))
    except Exception:  # at-most-once: dropped, not retried; a dead Redis must not stop the sender
        failures.failed(group)


class Publisher:
    """This process's publisher thread: an event loop running one Coalescer, started at first use
    (and again in a child process after a fork, which does not copy threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._coalescer: Coalescer | None = None

    def _started(self) -> Coalescer:
        with self._lock:
            if self._coalescer is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                failures = _FailureLog()
                coalescer = Coalescer(
                    app_settings.push_interval_s(), lambda g, m: _send(g, m, failures), loop
                )
                # The thread's frame holds the sender's task: an event loop holds its tasks only weakly.
                sender = threading.Thread(
                    target=loop.run_until_complete, args=(coalescer.run(),), name="gpu-broadcast", daemon=True
                )
                sender.start()
                self._pid, self._coalescer = os.getpid(), coalescer
            return self._coalescer

    def publish(self, group: str, message: GroupMessage) -> None:
        self.publish_all([(group, message)])

    def publish_all(self, messages: Sequence[tuple[str, GroupMessage]]) -> None:
        """Hand group messages (an ingested batch's groups together) to the publisher thread."""
        layer = get_channel_layer()
        if layer is None or not messages:
            return
        if isinstance(layer, InMemoryChannelLayer):
            async_to_sync(_send_now)(layer, messages)
            return
        coalescer = self._started()
        coalescer.loop.call_soon_threadsafe(coalescer.offer_all, messages)


async def _send_now(layer: InMemoryChannelLayer, messages: Sequence[tuple[str, GroupMessage]]) -> None:
    for group, message in messages:
        message["sent_at"] = time.time()
        await layer.group_send(group, cast("dict[str, Any]", message))


PUBLISHER = Publisher()


def samples_published(*, node: str, frames: list[GpuFrame]) -> None:
    """Fan one node's latest frames out to the cluster, node and tenant-namespace groups."""
    if not frames:
        return
    by_uuid = {frame["uuid"]: frame for frame in frames}
    groups = {cluster_group(): dict(by_uuid), node_group(node): dict(by_uuid)}
    groups |= {namespace_group(ns): gpus for ns, gpus in _by_namespace(frames).items()}
    messages = [
        (group, SamplesMessage(type="gpu.samples", gpus=gpus, sent_at=0.0)) for group, gpus in groups.items()
    ]
    PUBLISHER.publish_all(messages)


def _by_namespace(frames: list[GpuFrame]) -> dict[str, dict[str, GpuFrame]]:
    """Per tenant namespace, each GPU's frame with only that namespace's processes."""
    out: dict[str, dict[str, GpuFrame]] = {}
    for frame in frames:
        for namespace in {p["pod_namespace"] for p in frame["processes"] if p["pod_namespace"]}:
            own = [p for p in frame["processes"] if p["pod_namespace"] == namespace]
            out.setdefault(namespace, {})[frame["uuid"]] = {**frame, "processes": own}
    return out


def node_frame(node: Any) -> NodeFrame:
    return NodeFrame(
        name=node.name,
        cordoned=node.cordoned,
        desired_cordoned=node.desired_cordoned,
        ready=node.is_ready,
        deleted=node.deleted,
        gpu_model=node.gpu_model,
        gpu_count=node.gpu_count,
        held_for=node.held_for,
    )


def node_changed(node: Any) -> None:
    frame = node_frame(node)
    message = NodeStateMessage(type="node.state", nodes={node.name: frame}, sent_at=0.0)
    own = NodeStateMessage(**{**message, "nodes": {node.name: frame}})
    PUBLISHER.publish_all([(cluster_group(), message), (node_group(node.name), own)])
