"""Websocket routes of every app, collected in one list (the T02 matrix walks it)."""

from typing import Any

websocket_urlpatterns: list[Any] = []
