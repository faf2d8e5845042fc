"""Bodies over the limit are refused as they arrive; the rest reach the application unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from portal.body_limit import BodyLimit, Message, Receive, Scope, Send, request_body_limit

LIMIT = 1000


class Inner:
    """The application behind the limit: what it was handed."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


class Client:
    """Sends `chunks` as a body (with or without Content-Length); counts what the server read."""

    def __init__(self, chunks: list[bytes], *, declared: int | None = None) -> None:
        self.chunks, self.declared, self.read = chunks, declared, 0
        self.sent: list[Message] = []

    def scope(self, path: str = "/api/v1/jobs/") -> Scope:
        headers = [(b"content-length", str(self.declared).encode())] if self.declared is not None else []
        return {"type": "http", "path": path, "headers": headers}

    async def receive(self) -> Message:
        chunk = self.chunks[self.read]
        self.read += 1
        return {"type": "http.request", "body": chunk, "more_body": self.read < len(self.chunks)}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def status(self) -> Any:
        return self.sent[0]["status"]


async def run(client: Client, path: str = "/api/v1/jobs/") -> Inner:
    inner = Inner()
    await BodyLimit(inner, lambda _: LIMIT)(client.scope(path), client.receive, client.send)
    return inner


async def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_read() -> None:
    client = Client([b"x" * 10] * 200, declared=2000)
    inner = await run(client)
    assert (client.status, client.read, inner.bodies) == (413, 0, [])
    assert b"larger than 1000 bytes" in client.sent[1]["body"]


async def test_a_chunked_body_is_refused_at_the_chunk_that_passes_the_limit() -> None:
    client = Client([b"x" * 300] * 100)  # 30 kB, no Content-Length
    inner = await run(client)
    assert (client.status, inner.bodies) == (413, [])
    assert client.read == 4  # 1200 bytes read of 30 000: nothing past the limit's chunk


async def test_a_body_within_the_limit_reaches_the_application_unchanged() -> None:
    client = Client([b"a" * 400, b"b" * 400, b"c" * 200], declared=1000)
    inner = await run(client)
    assert client.status == 200
    assert inner.bodies == [b"a" * 400 + b"b" * 400 + b"c" * 200]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2_621_440, GPU_INGEST_MAX_BYTES=16 * 1024 * 1024)
def test_the_agents_batches_have_their_own_limit() -> None:
    assert request_body_limit("/api/v1/jobs/") == 2_621_440
    assert request_body_limit("/api/v1/ingest/samples") == 16 * 1024 * 1024
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=None):
        assert request_body_limit("/accounts/login/") is None


@pytest.mark.parametrize("kind", ["websocket", "lifespan"])
async def test_other_connections_pass_untouched(kind: str) -> None:
    seen: list[str] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["type"])

    async def nothing() -> Message:
        raise AssertionError("not read")

    async def ignore(message: Message) -> None:
        return None

    await BodyLimit(inner, lambda _: LIMIT)({"type": kind, "path": "/ws/"}, nothing, ignore)
    assert seen == [kind]
