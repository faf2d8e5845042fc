"""Delivery to a real local HTTP server that the tests start and stop: buffering, 400, 401, the cap."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from plugin.agent.attribution import Attributor
from plugin.agent.collector import Collector
from plugin.agent.sender import SampleBuffer, Sender, TokenFile
from plugin.contract import INGEST_PATH, GpuSample, ProcessSample
from plugin.sim.nvml import SimNvml, default_gpus


class Portal:
    """http.server in a thread on 127.0.0.1; `status` decides the answer; bodies are recorded."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.status = 200
        self.bodies: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self._httpd: http.server.ThreadingHTTPServer | None = None

    def start(self) -> None:
        portal = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                assert self.path == INGEST_PATH
                portal.auth.append(self.headers["Authorization"])
                portal.bodies.append(body)
                reply: dict[str, object] = (
                    {"accepted": len(body["samples"]), "duplicates": 0}
                    if portal.status == 200
                    else {"errors": ["x"]}
                )
                data = json.dumps(reply).encode()
                self.send_response(portal.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def received(self) -> list[dict[str, Any]]:
        return [s for b in self.bodies for s in b["samples"]]


@pytest.fixture
def portal() -> Iterator[Portal]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = Portal(port)
    yield p
    p.stop()


def _sender(portal: Portal, buffer: SampleBuffer) -> Sender:
    client = httpx.Client(timeout=2.0)
    return Sender(
        buffer,
        portal_url=f"http://127.0.0.1:{portal.port}",
        token="tok-1",
        node="node-a",
        agent_version="t",
        client=client,
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
    )


def _collector(tmp: Path, gpus: int = 8) -> Collector:
    return Collector(SimNvml(default_gpus(gpus), call_cost_s=0), Attributor(tmp, None))


def test_samples_wait_while_the_portal_is_down_and_arrive_once_in_order(
    portal: Portal, short_dir: Path
) -> None:
    collector, buffer = _collector(short_dir), SampleBuffer(10_000)
    sender = _sender(portal, buffer)
    for _ in range(5):
        buffer.add(collector.poll())
        assert sender.send_once(0.0) > 0  # connection refused: back off, keep everything
    assert len(buffer) == 40
    portal.start()
    while len(buffer):
        sender.send_once(0.0)
    got = portal.received()
    assert len(got) == 40
    assert [s["ts"] for s in got] == sorted(s["ts"] for s in got)
    assert portal.auth[0] == "Bearer tok-1"
    assert portal.bodies[0]["node"] == "node-a"


def test_the_body_has_exactly_the_contract_fields(portal: Portal, short_dir: Path) -> None:
    collector, buffer = _collector(short_dir, 1), SampleBuffer(100)
    collector.lib.add_process(collector.uuids[0], 42, 512)  # type: ignore[attr-defined]
    buffer.add(collector.poll())
    portal.start()
    _sender(portal, buffer).send_once(0.0)
    sample = portal.bodies[0]["samples"][0]
    assert set(portal.bodies[0]) == {"node", "agent_version", "samples"}
    assert set(sample) == _names(GpuSample)
    assert set(sample["processes"][0]) == _names(ProcessSample)
    assert sample["ts"].endswith("Z")
    assert len(sample["ts"]) == len("2026-11-30T12:00:00.123Z")


def _names(struct: type[msgspec.Struct]) -> set[str]:
    return {field.encode_name for field in msgspec.structs.fields(struct)}


def test_a_400_batch_is_dropped_and_never_retried(portal: Portal, short_dir: Path) -> None:
    buffer = SampleBuffer(100)
    buffer.add(_collector(short_dir).poll())
    portal.status = 400
    portal.start()
    sender = _sender(portal, buffer)
    sender.send_once(0.0)
    sender.send_once(0.0)
    assert len(portal.bodies) == 1
    assert len(buffer) == 0
    assert sender.stats.rejected == 8


@pytest.mark.parametrize("status", [401, 403, 500, 503])
def test_auth_failures_and_server_errors_keep_the_batch(portal: Portal, short_dir: Path, status: int) -> None:
    buffer = SampleBuffer(100)
    buffer.add(_collector(short_dir).poll())
    portal.status = status
    portal.start()
    sender = _sender(portal, buffer)
    assert sender.send_once(0.0) > 0
    assert len(buffer) == 8
    portal.status = 200
    sender.send_once(0.0)
    assert len(portal.received()) == 16  # the failed attempt was seen, then the same batch accepted
    assert len(buffer) == 0


def test_the_buffer_cap_holds_through_a_long_outage(portal: Portal, short_dir: Path) -> None:
    """One hour at 1 Hz on 8 GPUs with the portal away: memory stays at the cap, oldest dropped."""
    collector, buffer = _collector(short_dir), SampleBuffer(5_000)
    sender = _sender(portal, buffer)
    for i in range(3_600):
        buffer.add(collector.poll())
        if i % 100 == 0:
            sender.send_once(0.0)
        assert len(buffer) <= 5_000
    assert len(buffer) == 5_000
    assert buffer.dropped == 3_600 * 8 - 5_000
    portal.start()
    while len(buffer):
        sender.send_once(0.0)
    assert len(portal.received()) == 5_000
    assert max(len(b["samples"]) for b in portal.bodies) <= 5_000


def test_the_token_file_is_read_again_for_every_send(portal: Portal, short_dir: Path) -> None:
    """The kubelet rotates a projected ServiceAccount token in place; the agent must pick it up."""
    token_file = short_dir / "token"
    token_file.write_text("sa-token-1\n")
    buffer = SampleBuffer(100)
    sender = Sender(
        buffer,
        portal_url=f"http://127.0.0.1:{portal.port}",
        token=TokenFile(token_file),
        node="node-a",
        agent_version="t",
        client=httpx.Client(timeout=2.0),
        backoff_initial_s=0.01,
    )
    portal.start()
    buffer.add(_collector(short_dir, 1).poll())
    sender.send_once(0.0)
    token_file.write_text("sa-token-2\n")
    buffer.add(_collector(short_dir, 1).poll())
    sender.send_once(0.0)
    assert portal.auth == ["Bearer sa-token-1", "Bearer sa-token-2"]


def test_a_401_heals_once_the_rotated_token_is_in_place(portal: Portal, short_dir: Path) -> None:
    token_file = short_dir / "token"
    token_file.write_text("expired")
    buffer = SampleBuffer(100)
    buffer.add(_collector(short_dir, 1).poll())
    sender = Sender(
        buffer,
        portal_url=f"http://127.0.0.1:{portal.port}",
        token=TokenFile(token_file),
        node="node-a",
        agent_version="t",
        client=httpx.Client(timeout=2.0),
        backoff_initial_s=0.01,
    )
    portal.status = 401
    portal.start()
    assert sender.send_once(0.0) > 0
    assert len(buffer) == 1
    token_file.write_text("fresh")
    portal.status = 200
    sender.send_once(0.0)
    assert portal.auth == ["Bearer expired", "Bearer fresh"]
    assert len(buffer) == 0


def test_an_unreadable_token_file_keeps_the_last_token(short_dir: Path) -> None:
    token_file = short_dir / "token"
    token_file.write_text("good")
    read = TokenFile(token_file)
    assert read() == "good"
    token_file.unlink()  # mid-rotation, or the volume briefly away
    assert read() == "good"
