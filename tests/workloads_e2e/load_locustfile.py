"""The load test's users: portal users doing reads, submits, log tails and a live jobs socket each (Locust).

Run by tests/workloads_e2e/test_load.py as its own `locust --headless` process: Locust brings
gevent, which must stay out of the pytest process. Identities (API token, session cookie, project,
a few job ids) come from the JSON file named by LOAD_TEST_IDENTITIES. Socket lag is reported as a Locust
request "WS socket lag": the time from a job's `changed_at` to the message reaching the user.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from datetime import datetime
from typing import Any

import gevent  # type: ignore[import-untyped]  # no stubs; Locust's own dependency
import websocket
from locust import HttpUser, between, task

IDENTITIES: list[dict[str, Any]] = json.loads(open(os.environ["LOAD_TEST_IDENTITIES"]).read())  # noqa: SIM115, PTH123
_NEXT = itertools.count()
SUBMIT = {"image": "registry.example.com/team/train:1.0", "gpus": 1, "cpu_millicores": 100, "memory_mib": 64}


class PortalUser(HttpUser):
    wait_time = between(5, 15)  # a researcher at the portal or a script polling it, not a flood

    def on_start(self) -> None:
        self.me = IDENTITIES[next(_NEXT) % len(IDENTITIES)]
        self.jobs: list[str] = list(self.me["jobs"])
        self.client.headers["Authorization"] = f"Bearer {self.me['token']}"
        self.ws: websocket.WebSocket | None = None
        self._connect()  # the page opens its socket before the user does anything on it
        self.reader = gevent.spawn(self._listen)

    def on_stop(self) -> None:
        self.reader.kill()
        if self.ws is not None:
            self.ws.close()

    @task(10)
    def jobs_list(self) -> None:
        self.client.get("/api/v1/jobs/?page_size=20", name="read: jobs list")

    @task(6)
    def job_detail(self) -> None:
        self.client.get(f"/api/v1/jobs/{random.choice(self.jobs)}/", name="read: job")

    @task(2)
    def projects(self) -> None:
        self.client.get("/api/v1/projects/", name="read: projects")

    @task(1)
    def submit(self) -> None:
        body = {**SUBMIT, "project": self.me["project"], "simulate": {"run_seconds": 20}}
        with self.client.post("/api/v1/jobs/", json=body, name="submit", catch_response=True) as answer:
            if answer.status_code == 201:
                self.jobs.append(answer.json()["id"])
            else:
                answer.failure(f"{answer.status_code}: {answer.text[:200]}")

    @task(2)
    def log_tail(self) -> None:
        self.client.get(f"/api/v1/jobs/{random.choice(self.jobs)}/logs/", name="log tail")

    def _connect(self) -> None:
        """The jobs page's socket; a failed connect is retried, as the page does (each one reported)."""
        host = str(self.host)
        url = host.replace("http://", "ws://") + "/ws/jobs/"
        while self.ws is None:
            started = time.perf_counter()
            try:
                self.ws = websocket.create_connection(
                    url, cookie=f"sessionid={self.me['session']}", origin=host, timeout=30
                )
            except Exception as exc:
                self._report("connect", started, exc)
                gevent.sleep(random.uniform(1, 3))
        self._report("connect", started, None)

    def _listen(self) -> None:
        """Every job.state message's lag, from the job's change to the message's arrival."""
        assert self.ws is not None
        connected, seen = time.time(), set[tuple[str, float]]()
        while True:
            try:
                message = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                continue
            except Exception as exc:
                self._report("socket lag", time.perf_counter(), exc)
                return
            changed = _changed_at(message)
            if changed is None or changed < connected or (message["job"], changed) in seen:
                continue  # a change from before the socket opened, or one resent with a queue update
            seen.add((message["job"], changed))
            lag_ms = (time.time() - changed) * 1000
            self.environment.events.request.fire(
                request_type="WS",
                name="socket lag",
                response_time=max(0.0, lag_ms),
                response_length=0,
                exception=None,
                context={},
            )

    def _report(self, name: str, started: float, exc: Exception | None) -> None:
        self.environment.events.request.fire(
            request_type="WS",
            name=name,
            response_time=(time.perf_counter() - started) * 1000,
            response_length=0,
            exception=exc,
            context={},
        )


def _changed_at(message: dict[str, Any]) -> float | None:
    """When the job's state changed (a job.state message); the lag runs from then to arrival."""
    if message.get("type") != "job.state" or not message.get("changed_at"):
        return None
    return datetime.fromisoformat(message["changed_at"]).timestamp()
