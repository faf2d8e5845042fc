"""The only sender of gpu messages, so naming and throttling live in one place: group names, frames, and
a coalescing publisher.

Concurrency story: `publish()` is called from sync code (the ingest view in a worker thread, Celery
tasks, admin actions) and must never wait on Redis. It hands the message to one daemon thread per
process that owns an event loop; there a `Coalescer` throttles per group and message type (a
token bucket: a message goes out at once when a token is there, later ones are merged, newest frame
per GPU wins, and sent when the next token comes). So a group gets at most about one frame per
interval from each process, and consumers coalesce again per socket. Delivery is
at-most-once like every channel layer: pages resync from the database on (re)connect.

The hand-over wakes the thread at most once per HANDOFF_S: what arrives meanwhile waits for that
wake-up, and the groups due at the same moment are sent together (gpu/layer_send.py). Woken and
sending once per ingested batch, the thread took about 0.5 ms of the interpreter per batch (B6).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, cast

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from gpu import app_settings
from gpu.layer_send import GroupSender
from gpu.messages import GpuFrame, GroupMessage, NodeFrame, NodeStateMessage, SamplesMessage

log = logging.getLogger(__name__)
# A burst of batches is handed to the publisher thread in one wake-up per this many seconds; a lone
# message goes at once. Small beside the live pages' 1 s frames and B7's 250 ms goal (it added
# about 10 ms to B7's median and 20 ms to its p99, side by side).
HANDOFF_S = 0.02

SendDue = Callable[[list[tuple[str, GroupMessage]]], Coroutine[Any, Any, None]]


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
    """Newest frame per GPU (or node) wins; the pending message is updated in place."""
    if old is None or old["type"] != new["type"]:
        return new
    if old["type"] == "gpu.samples" and new["type"] == "gpu.samples":
        old["gpus"].update(new["gpus"])
    elif old["type"] == "node.state" and new["type"] == "node.state":
        old["nodes"].update(new["nodes"])
    return old


class Coalescer:
    """A per-key throttle on an asyncio loop (used here and by the consumers): a token bucket.

    The bucket holds BURST tokens and refills at REFILL tokens per `interval`. A 1 Hz source (an agent
    batch per second) passes without waiting even with jitter, where a plain "1 s since the last send"
    throttle would hold a slightly early frame for almost a second. The refill is a bit faster than
    one per interval on purpose: at exactly the source's rate, the deficit left by one late-then-early
    pair of batches would never drain and would become a permanent lag (measured: ~400 ms behind for
    good). A faster source is merged down to at most REFILL frames per interval (newest frame per GPU
    wins), which is what bounds the cluster view fed by every node.
    """

    BURST = 1.5
    REFILL = 1.25

    def __init__(self, interval: float, send: SendDue, loop: asyncio.AbstractEventLoop) -> None:
        self.interval, self.send, self.loop = interval, send, loop
        self._pending: dict[tuple[str, str], GroupMessage] = {}
        self._bucket: dict[tuple[str, str], tuple[float, float]] = {}  # slot -> (tokens, at)
        self._due: list[tuple[str, GroupMessage]] = []  # fired in this turn of the loop, sent together
        self._tasks: set[asyncio.Task[None]] = set()

    def _tokens(self, slot: tuple[str, str]) -> float:
        now = self.loop.time()
        tokens, at = self._bucket.get(slot, (self.BURST, now))
        if self.interval <= 0:
            return self.BURST
        return min(self.BURST, tokens + (now - at) * self.REFILL / self.interval)

    def offer(self, key: str, message: GroupMessage) -> None:
        slot = (key, message["type"])
        scheduled = slot in self._pending
        self._pending[slot] = merge(self._pending.get(slot), message)
        if not scheduled:
            wait = max(0.0, (1.0 - self._tokens(slot)) * self.interval / self.REFILL)
            self.loop.call_later(wait, self._fire, slot)

    def offer_all(self, messages: Sequence[tuple[str, GroupMessage]]) -> None:
        for key, message in messages:
            self.offer(key, message)

    def _fire(self, slot: tuple[str, str]) -> None:
        message = self._pending.pop(slot, None)
        if message is None:
            return
        self._bucket[slot] = (max(0.0, self._tokens(slot) - 1.0), self.loop.time())
        if not self._due:
            self.loop.call_soon(self._send_due)
        self._due.append((slot[0], message))

    def _send_due(self) -> None:
        due, self._due = self._due, []
        task = self.loop.create_task(self.send(due))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class Publisher:
    """One event-loop thread per process that coalesces and sends group messages."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._coalescer: Coalescer | None = None
        self._handed: deque[Sequence[tuple[str, GroupMessage]]] = deque()
        self._armed = False  # a wake-up of the thread is on its way
        self._drained_at = -HANDOFF_S

    def _start(self) -> Coalescer:
        with self._lock:
            if self._coalescer is None or self._pid != os.getpid():  # new process after a fork
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="gpu-broadcast", daemon=True).start()
                self._pid, self._handed, self._armed = os.getpid(), deque(), False
                self._coalescer = Coalescer(app_settings.push_interval_s(), self._sender(), loop)
            return self._coalescer

    @staticmethod
    def _sender() -> SendDue:
        sender = GroupSender()  # one per loop: its semaphore and Redis pool bind to the first loop using them

        async def send(due: list[tuple[str, GroupMessage]]) -> None:
            now = time.time()
            for _, message in due:
                message["sent_at"] = now
            await sender.send_all(get_channel_layer(), due)

        return send

    def publish(self, group: str, message: GroupMessage) -> None:
        self.publish_all([(group, message)])

    def publish_all(self, messages: Sequence[tuple[str, GroupMessage]]) -> None:
        """Hand several group messages to the thread at once (an ingested batch's groups together)."""
        layer = get_channel_layer()
        if isinstance(layer, InMemoryChannelLayer):
            # Embedded mode: the layer's queues belong to the server's own event loop, so send there
            # (async_to_sync from a request thread goes back to it); consumers still coalesce per view.
            for group, message in messages:
                message["sent_at"] = time.time()
                async_to_sync(layer.group_send)(group, cast("dict[str, Any]", message))
            return
        coalescer = self._start()
        self._handed.append(messages)
        if not self._armed:  # two threads may both arm: one wake-up drains, the other finds nothing
            self._armed = True
            coalescer.loop.call_soon_threadsafe(self._arm, coalescer)

    def _arm(self, coalescer: Coalescer) -> None:
        wait = max(0.0, self._drained_at + HANDOFF_S - coalescer.loop.time())
        coalescer.loop.call_later(wait, self._drain, coalescer)

    def _drain(self, coalescer: Coalescer) -> None:
        self._armed = False  # first: what is handed over from here on arms a new wake-up
        self._drained_at = coalescer.loop.time()
        while self._handed:
            try:
                coalescer.offer_all(self._handed.popleft())
            except Exception:  # one bad message must not strand the rest until the next hand-over
                log.exception("offering group messages failed")


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
    )


def node_changed(node: Any) -> None:
    frame = node_frame(node)
    message = NodeStateMessage(type="node.state", nodes={node.name: frame}, sent_at=0.0)
    own = NodeStateMessage(**{**message, "nodes": {node.name: frame}})
    PUBLISHER.publish_all([(cluster_group(), message), (node_group(node.name), own)])
