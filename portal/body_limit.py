"""Request bodies over the limit are answered 413 as they arrive, before Django reads them.

Django's ASGI handler reads a whole body into a spooled temporary file (to /tmp past 2.5 MiB) before
any view or setting looks at it, and DATA_UPLOAD_MAX_MEMORY_SIZE is only checked when a view reads
`request.body`. So a client could make every web pod write gigabytes to its /tmp. This middleware
counts the bytes as they come, declared (Content-Length) or chunked, and answers 413 at the first
byte over the limit; under the limit it hands the body on unchanged. It works behind any ingress
controller, whatever that one's own limit is.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from django.conf import settings

from portal.api.errors import BodyTooLarge, error_body

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

INGEST_PATH = "/api/v1/ingest/"


def request_body_limit(path: str) -> int | None:
    """The largest body `path` takes, in bytes (None: no limit): the agents' telemetry batches have
    their own (GPU_INGEST_MAX_BYTES); everything else Django's DATA_UPLOAD_MAX_MEMORY_SIZE."""
    if path.startswith(INGEST_PATH):
        return int(settings.GPU_INGEST_MAX_BYTES)
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return None if limit is None else int(limit)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _too_large(send: Send, limit: int) -> None:
    message = f"The request body is larger than {limit} bytes."
    body = orjson.dumps(error_body(413, BodyTooLarge.default_code, message))
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware around the HTTP application (portal/asgi.py)."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int | None] = request_body_limit) -> None:
        self.app, self.limit_for = app, limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit_for(scope.get("path", "")) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _too_large(send, limit)
            return
        # Read up to the limit here (Django would read it all anyway), then replay it.
        arrived: deque[Message] = deque()
        size = 0
        while True:
            message = await receive()
            arrived.append(message)
            if message["type"] != "http.request":
                break  # the client went away: the app sees that too
            size += len(message.get("body", b""))
            if size > limit:
                await _too_large(send, limit)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return arrived.popleft() if arrived else await receive()

        await self.app(scope, replay, send)
