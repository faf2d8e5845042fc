"""Websocket routes of every app, collected in one list (the T02 matrix walks it)."""

from typing import Any

from gpu.routing import websocket_urlpatterns as gpu_websocket_urlpatterns

websocket_urlpatterns: list[Any] = []
websocket_urlpatterns += gpu_websocket_urlpatterns
