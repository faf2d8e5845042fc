"""Buffered delivery of samples to the portal (docs/telemetry-contract.md).

Memory is bounded: the buffer is a deque with a cap; when the portal is away long enough to fill it,
the oldest samples go first and are counted in `dropped`. A batch in flight is taken out of the
buffer and put back in front on a retryable failure, so concurrent polls never lose or reorder it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec

from plugin.contract import INGEST_PATH, MAX_SAMPLES_PER_BATCH, GpuSample, IngestBatch

log = logging.getLogger(__name__)
_ENCODER = msgspec.json.Encoder()


class SampleBuffer:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._q: deque[GpuSample[str]] = deque()
        self._lock = threading.Lock()
        self.dropped = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._q)

    def add(self, samples: list[GpuSample[str]]) -> None:
        with self._lock:
            self._q.extend(samples)
            if len(self._q) > self.cap:  # asked here: this runs on every poll
                self._trim()

    def take(self, n: int) -> list[GpuSample[str]]:
        with self._lock:
            return [self._q.popleft() for _ in range(min(n, len(self._q)))]

    def put_back(self, batch: list[GpuSample[str]]) -> None:
        with self._lock:
            self._q.extendleft(reversed(batch))
            self._trim()

    def _trim(self) -> None:
        over = len(self._q) - self.cap
        for _ in range(max(0, over)):
            self._q.popleft()
        self.dropped += max(0, over)


class TokenFile:
    """The bearer token, read from its file at every call: the kubelet rotates a projected
    ServiceAccount token (an atomic symlink swap) well before it expires, so a token read once at
    start would be refused within the hour. A failed read keeps the last good token."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._last = ""

    def __call__(self) -> str:
        try:
            self._last = self.path.read_text().strip()
        except OSError as exc:
            log.warning("cannot read the token file %s (%s); using the last token read", self.path, exc)
        return self._last


@dataclass
class SenderStats:
    sent: int = 0
    rejected: int = 0
    failures: int = 0


class Sender:
    """`send_once()` returns how long to wait before the next call (0 = more is waiting)."""

    def __init__(
        self,
        buffer: SampleBuffer,
        *,
        portal_url: str,
        token: str | Callable[[], str],
        node: str,
        agent_version: str,
        client: httpx.Client,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.buffer = buffer
        self.url = portal_url.rstrip("/") + INGEST_PATH
        self.token: Callable[[], str] = token if callable(token) else (lambda: token)
        self.node = node
        self.agent_version = agent_version
        self.client = client
        self.backoff_initial_s = backoff_initial_s
        self.backoff_max_s = backoff_max_s
        self.backoff = 0.0
        self.stats = SenderStats()

    def send_once(self, idle_s: float) -> float:
        batch = self.buffer.take(MAX_SAMPLES_PER_BATCH)
        if not batch:
            return idle_s
        body = _ENCODER.encode(IngestBatch(node=self.node, agent_version=self.agent_version, samples=batch))
        try:
            # The token is read fresh each time: tokens rotate.
            headers = {"Authorization": f"Bearer {self.token()}", "Content-Type": "application/json"}
            resp = self.client.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            return self._retry(batch, f"portal unreachable: {exc!r}")
        if resp.status_code == 200:
            self.stats.sent += len(batch)
            self.backoff = 0.0
            return 0.0 if len(self.buffer) else idle_s
        if resp.status_code == 400:
            # The portal will never accept this batch; retrying would wedge the queue behind it.
            self.stats.rejected += len(batch)
            log.error("portal rejected a batch of %d samples: %s", len(batch), resp.text[:2000])
            return 0.0
        if resp.status_code in (401, 403):
            # The token file is read again on the next try, so a rotated token heals this by itself;
            # a 403 may also refuse the batch (more GPUs than the node's capacity) until the node grows.
            what = "the node token" if resp.status_code == 401 else "the node token or its batch"
            return self._retry(batch, f"portal refused {what} ({resp.status_code}: {resp.text[:300]})")
        return self._retry(batch, f"portal answered {resp.status_code}")

    def _retry(self, batch: list[GpuSample[str]], why: str) -> float:
        self.buffer.put_back(batch)
        self.stats.failures += 1
        self.backoff = min(self.backoff_max_s, max(self.backoff_initial_s, self.backoff * 2))
        log.warning("%s; %d samples buffered, retry in %.1fs", why, len(self.buffer), self.backoff)
        return self.backoff
