"""Websocket routes of the gpu app (collected by portal/routing.py)."""

from typing import Any

from django.urls import path

from gpu import consumers

websocket_urlpatterns: list[Any] = [
    path("ws/cluster/", consumers.ClusterConsumer.as_asgi()),
    path("ws/nodes/<str:name>/", consumers.NodeConsumer.as_asgi()),
]
