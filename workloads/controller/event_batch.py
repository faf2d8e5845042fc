"""Kubernetes events for the jobs' timelines, sent in batches.

A job's start brings several events (Scheduled, Pulling, Pulled, Created, Started): one Celery task
each was most of the portal's own work per job under a submit burst. The event watch adds to a
buffer instead, and one task carries the buffer every FLUSH_S, or at once when it holds MAX_BATCH.
The timeline is informational, so like a single event before, a batch whose publish fails (broker
down) or that dies with the controller is not retried: the cluster keeps its own Events for an hour.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from workloads.choices import TaskName
from workloads.services import publisher

Event = dict[str, Any]
FLUSH_S = 0.5  # the most an event waits in the buffer: short beside a person reading the timeline
MAX_BATCH = 200  # one message stays small (each event is a few hundred bytes)


def _send(events: list[Event]) -> None:
    publisher.send(TaskName.RECORD_K8S_EVENTS, events, retries=0)


class EventBatch:
    def __init__(self, send: Callable[[list[Event]], None] = _send) -> None:
        self.send = send
        self.events: list[Event] = []
        self.lock = threading.Lock()

    def add(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)
            full = len(self.events) >= MAX_BATCH
        if full:
            self.flush()

    def flush(self) -> int:
        with self.lock:
            events, self.events = self.events, []
        for start in range(0, len(events), MAX_BATCH):
            self.send(events[start : start + MAX_BATCH])
        return len(events)

    def run(self, stop: threading.Event) -> None:
        """Flush every FLUSH_S until stop, then once more."""
        while not stop.wait(FLUSH_S):
            self.flush()
        self.flush()
