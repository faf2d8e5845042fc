"""Websocket test helpers: the full ASGI application (origin check, session auth) with a real cookie."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from channels.routing import get_default_application
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.test import Client

from accounts.models import User


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def connect(path: str, user: User | None) -> tuple[WebsocketCommunicator, bool]:
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver")]
    if user is not None:
        cookie = await sync_to_async(session_cookie)(user)
        headers.append((b"cookie", cookie.encode()))
    # settings.ASGI_APPLICATION: the full stack (origin check, sessions, auth, URL router).
    communicator = WebsocketCommunicator(get_default_application(), path, headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    return communicator, connected


async def receive_type(communicator: WebsocketCommunicator, kind: str, timeout: float = 5) -> dict[str, Any]:
    """The next message of one type (skipping others, e.g. node.state)."""
    while True:
        message: dict[str, Any] = await communicator.receive_json_from(timeout=timeout)
        if message.get("type") == kind:
            return message
