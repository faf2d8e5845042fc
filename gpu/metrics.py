"""Prometheus metrics of the portal's gpu side, served at /metrics behind a token or a staff session.

Counters are per process (prometheus-client's default registry); inventory gauges are computed from
the database at scrape time, so every replica reports the same numbers for them.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from accounts.selectors import is_operator
from gpu import app_settings

INGEST_SAMPLES = Counter("gpuportal_ingest_samples", "Telemetry samples received", ["result"])
INGEST_BATCHES = Counter("gpuportal_ingest_batches", "Telemetry batches accepted")
INGEST_SECONDS = Histogram(
    "gpuportal_ingest_seconds",
    "Time to validate and store one batch",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
)
PUSH_LAG = Histogram(
    "gpuportal_push_lag_seconds",
    "From a frame leaving broadcast.py to its websocket send",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)


def ingested(*, node: str, accepted: int, duplicates: int, seconds: float) -> None:
    INGEST_SAMPLES.labels("accepted").inc(accepted)
    INGEST_SAMPLES.labels("duplicate").inc(duplicates)
    INGEST_BATCHES.inc()
    INGEST_SECONDS.observe(seconds)


def pushed(*, lag_s: float) -> None:
    PUSH_LAG.observe(max(0.0, lag_s))


class InventoryCollector(Collector):
    """Nodes and GPUs by state, read at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from gpu import selectors

        nodes = GaugeMetricFamily("gpuportal_nodes", "Nodes by state", labels=["state"])
        qs = selectors.node_list()
        nodes.add_metric(["cordoned"], qs.filter(cordoned=True).count())
        nodes.add_metric(["schedulable"], qs.filter(cordoned=False).count())
        yield nodes
        gpus = GaugeMetricFamily("gpuportal_gpus", "GPUs by health and service", labels=["health", "service"])
        for key, count in selectors.gpus_by_state().items():
            health, service = key.split(":")
            gpus.add_metric([health, service], count)
        yield gpus


_registered = False


def _register() -> None:
    global _registered
    if not _registered:
        REGISTRY.register(InventoryCollector())
        _registered = True


def _allowed(request: HttpRequest) -> bool:
    token = app_settings.metrics_token()
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header.removeprefix("Bearer ").strip(), token)
    user: Any = getattr(request, "user", None)
    return is_operator(user)


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not _allowed(request):
        response = HttpResponse("Authentication required.", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = "Bearer"
        return response
    _register()
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
