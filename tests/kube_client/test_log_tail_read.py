"""A log read keeps only its end, in bounded memory, however long the body (one huge line included).

Served by a plain local HTTP server standing in for the API server's pods/log: the client code under
test is the real one (urllib3 through the official client's connection handling)."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from kubernetes import client as k8s

from workloads.k8s.client import RealKubeClient

BODY_MB = 40


class _HugeLog(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(BODY_MB * 1024 * 1024 + 3))
        self.end_headers()
        block = b"x" * (1024 * 1024)  # a job that never prints a newline
        for _ in range(BODY_MB):
            self.wfile.write(block)
        self.wfile.write(b"END")

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def api_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HugeLog)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_the_tail_of_a_huge_one_line_log_is_read_in_bounded_memory(api_server: str) -> None:
    configuration = k8s.Configuration()
    configuration.host = api_server
    kube = RealKubeClient(k8s.ApiClient(configuration))
    tracemalloc.start()
    try:
        data, cut = kube.read_tail("/api/v1/namespaces/gp-a/pods/p/log", {"container": "main"}, 4096)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cut
    assert data == b"x" * 4093 + b"END"
    assert peak < 4 * 1024 * 1024  # the 40 MB body never sat in memory
