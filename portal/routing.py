"""Websocket routes of every app, collected in one list (the tenancy test matrix walks it)."""

from typing import Any

from gpu.routing import websocket_urlpatterns as gpu_websocket_urlpatterns
from workloads.routing import websocket_urlpatterns as workloads_websocket_urlpatterns
from workloads.telemetry_consumer import routes as job_telemetry_routes

websocket_urlpatterns: list[Any] = []
websocket_urlpatterns += gpu_websocket_urlpatterns
websocket_urlpatterns += job_telemetry_routes()  # ws/jobs/<uuid>/telemetry/
websocket_urlpatterns += workloads_websocket_urlpatterns
