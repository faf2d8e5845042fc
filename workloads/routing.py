from typing import Any

from django.urls import path

from workloads.consumers import JobsConsumer

websocket_urlpatterns: list[Any] = [path("ws/jobs/", JobsConsumer.as_asgi())]
