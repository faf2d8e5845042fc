"""Watchers for the chart's real-node test: a component's container exits, and a URL polled
while something else happens (tests/realnode/test_chart_on_real_node.py)."""

from __future__ import annotations

import contextlib
import threading
import time

import httpx
import urllib3
from kubernetes import client, watch


class ExitWatch:
    """The exit codes of a component's containers while it runs (a hook Job is deleted once it
    succeeds, so its pod's end is seen as it happens or not at all)."""

    def __init__(self, core: client.CoreV1Api, namespace: str, component: str) -> None:
        self.exits: dict[str, int] = {}
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]
        self._args = (core.list_namespaced_pod, namespace)
        self._selector = f"app.kubernetes.io/component={component}"
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ExitWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._watch.stop()  # type: ignore[no-untyped-call]
        self._thread.join(10)

    def _run(self) -> None:
        func, namespace = self._args
        events = self._watch.stream(  # type: ignore[no-untyped-call]
            func, namespace, label_selector=self._selector, timeout_seconds=900
        )
        # Stopping the watch cuts its response short.
        with contextlib.suppress(urllib3.exceptions.ProtocolError):
            for event in events:
                pod = event["object"].to_dict()
                for status in pod["status"]["container_statuses"] or []:
                    ended = status["state"]["terminated"]
                    if ended is not None:
                        self.exits[pod["metadata"]["name"]] = ended["exit_code"]


class Poller:
    """GETs one URL every 0.2 s in a thread; what did not answer 200 is kept."""

    def __init__(self, http: httpx.Client, path: str) -> None:
        self.http, self.path = http, path
        self.count = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.count += 1
            try:
                response = self.http.get(self.path)
            except httpx.HTTPError as error:
                self.failures.append(f"{time.strftime('%X')} {error!r}")
                continue
            if response.status_code != 200:
                self.failures.append(f"{time.strftime('%X')} {response.status_code} {response.text[:200]}")
