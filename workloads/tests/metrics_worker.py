"""One worker process of the shared-metrics scenario (test_metrics_shared.py), run as
`python -m workloads.tests.metrics_worker '<plan as JSON>'` on the test database.

It posts its batches to the real ingest endpoint, runs the real watch loop
over a scripted API server (`gone` expired watches, then `errors` failed rounds, then a clean end),
flushing the watch figures as the controller's tick does while the watch runs and once at the end,
then observes push lags just before it exits (as the consumers do: deferred).
Each HTTP status goes to stdout, one a line.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import django
import orjson


class ScriptedApi:
    """A list answers one item; each watch follows the script, and the last one stops the watcher."""

    def __init__(self, gone: int, errors: int, stop: threading.Event) -> None:
        self.script: list[str] = ["gone"] * gone + ["error"] * errors
        self.stop = stop

    def list_raw(self, path: str, query: dict[str, str] | None = None) -> bytes:
        items = [{"metadata": {"name": "x", "resourceVersion": "5"}}]
        return orjson.dumps({"items": items, "metadata": {"resourceVersion": "10"}})

    def stream(self, path: str, query: dict[str, str] | None = None, timeout: float = 0) -> Iterator[bytes]:
        from workloads.k8s.errors import K8sError

        step = self.script.pop(0) if self.script else "end"
        if step == "error":
            raise K8sError(500, "scripted failure")
        if step == "end":
            self.stop.set()
            return iter([])
        return iter([orjson.dumps({"type": "ERROR", "object": {"code": 410, "message": "too old"}})])


def watch(plan: dict[str, Any]) -> None:
    from workloads.controller.counts import WatchCounts
    from workloads.k8s.watch import Watcher, WatchSpec

    stop = threading.Event()
    watchers = [
        Watcher(
            client=ScriptedApi(w["gone"], w["errors"], stop),  # type: ignore[arg-type]
            spec=WatchSpec(w["kind"], "/api/v1/x", None, lambda k, o: None, lambda items: None),
            min_relist_interval_s=0,
            max_backoff_s=0.1,
        )
        for w in plan["watches"]
    ]
    counts = WatchCounts(watchers)
    for watcher in watchers:
        stop.clear()
        runner = threading.Thread(target=watcher.run, args=(stop,))
        runner.start()
        while runner.is_alive():
            counts.flush()  # as each tick does, mid-watch: only the growth may be added
            runner.join(0.05)
    counts.flush()


def main(plan: dict[str, Any]) -> None:
    django.setup()
    from django.test import Client

    from gpu import metrics

    client = Client()
    for body in plan["batches"]:
        response = client.post(
            "/api/v1/ingest/samples",
            orjson.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {plan['token']}",
        )
        print(response.status_code)
    watch(plan)
    for lag in plan["push_lags"]:  # deferred, and last: only the exit flush can send them
        metrics.pushed(lag_s=lag)


if __name__ == "__main__":
    main(orjson.loads(sys.argv[1]))
