"""The agent's two loops: poll NVML every `interval_s`, and drain the buffer to the portal."""

from __future__ import annotations

import logging
import threading
import time

from plugin.agent.collector import Collector, XidWatcher
from plugin.agent.metrics import AgentMetrics
from plugin.agent.sender import SampleBuffer, Sender

log = logging.getLogger(__name__)


class Agent:
    def __init__(
        self,
        collector: Collector,
        buffer: SampleBuffer,
        sender: Sender | None,
        metrics: AgentMetrics,
        *,
        interval_s: float,
    ) -> None:
        self.collector = collector
        self.buffer = buffer
        self.sender = sender
        self.metrics = metrics
        self.interval_s = interval_s
        self.xids = XidWatcher(collector.lib, collector)
        self.index_of = {u: i for i, u in enumerate(collector.uuids)}
        self.polls = 0
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._poll_loop, name="poll", daemon=True)]
        if sender is not None:
            self._threads.append(threading.Thread(target=self._send_loop, name="send", daemon=True))

    def start(self) -> None:
        self.xids.start()
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        self.xids.stop()

    def wait(self) -> None:
        self._stop.wait()

    def request_stop(self) -> None:
        self._stop.set()

    def poll_once(self) -> None:
        samples = self.collector.poll()
        self.buffer.add(samples)
        self.metrics.update(self.index_of, samples, self.buffer)
        self.polls += 1

    def _poll_loop(self) -> None:
        # Fixed-rate schedule: a slow poll does not push every later one back.
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:
                log.exception("poll failed")
            next_at += self.interval_s
            next_at = max(next_at, time.monotonic())
            self._stop.wait(next_at - time.monotonic())

    def _send_loop(self) -> None:
        if self.sender is None:
            return
        while not self._stop.is_set():
            try:
                delay = self.sender.send_once(self.interval_s)
            except Exception:
                log.exception("send failed")
                delay = self.interval_s
            self._stop.wait(delay)
