"""The accounts tests' local webhook receiver (a real HTTP server on a loopback port)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import override_settings


class Receiver(ThreadingHTTPServer):
    """A local webhook endpoint: answers `statuses` in turn (then 200), keeps what it got."""

    def __init__(self, statuses: list[int], address: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self.statuses, self.got = statuses, []  # type: list[int], list[tuple[dict[str, str], bytes]]
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.got.append((dict(self.headers), body))
        self.send_response(self.server.statuses.pop(0) if self.server.statuses else 200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    server = Receiver(list(getattr(request, "param", [])))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with override_settings(GPUPORTAL_WEBHOOK_ALLOW_PRIVATE=True):
        yield server
    server.shutdown()
