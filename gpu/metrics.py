"""Prometheus metrics of the portal's gpu side, served at /metrics behind a token or a staff session.

Nothing here counts in this process alone: inventory gauges are read from the database at scrape
time, and the ingest and push figures are shared totals (gpu/counters.py, one Redis hash), so every
web replica answers the same numbers. Only prometheus-client's own `process_*` and `python_*`
figures are the answering process's.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Iterator
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from accounts.selectors import is_operator
from gpu import app_settings, counters
from gpu.choices import GpuHealth

INGEST_SAMPLES = "gpuportal_ingest_samples"  # result: accepted | duplicate | refused
INGEST_BATCHES = "gpuportal_ingest_batches"  # result: accepted | refused
INGEST_SECONDS = "gpuportal_ingest_seconds"
INGEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
PUSH_LAG = "gpuportal_push_lag_seconds"
PUSH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def ingested(*, node: str, accepted: int, duplicates: int, seconds: float) -> None:
    """A stored batch's handling time (its samples are counted by gpu.ingest once they commit);
    deferred like ingest's counts, so no Redis round trip is added to each batch."""
    counters.observe(INGEST_SECONDS, seconds, buckets=INGEST_BUCKETS, deferred=True)


def pushed(*, lag_s: float) -> None:
    """Called on the consumers' event loop: deferred, so no Redis round trip blocks it."""
    counters.observe(PUSH_LAG, max(0.0, lag_s), buckets=PUSH_BUCKETS, deferred=True)


def counter_family(
    totals: dict[str, float], name: str, doc: str, labels: list[str], always: Iterable[tuple[str, ...]] = ()
) -> CounterMetricFamily:
    """One shared counter as a family; `always` are label sets shown as 0 before their first count."""
    family = CounterMetricFamily(name, doc, labels=labels)
    values = {**dict.fromkeys(always, 0.0), **counters.series(totals, name)}
    for key in sorted(values):
        family.add_metric(list(key), values[key])
    return family


def histogram_family(
    totals: dict[str, float], name: str, doc: str, buckets: tuple[float, ...]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc)
    cumulative, total = counters.histogram(totals, name, buckets)
    family.add_metric([], cumulative, sum_value=total)
    return family


class SharedCountersCollector(Collector):
    """The ingest and push totals of every process, read from Redis at scrape time."""

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily("gpuportal_shared_counters_up", "")]

    def collect(self) -> Iterator[Metric]:
        try:
            totals = counters.read()
        except counters.CountersUnavailable:
            yield GaugeMetricFamily("gpuportal_shared_counters_up", "Shared totals readable", value=0)
            return
        yield GaugeMetricFamily("gpuportal_shared_counters_up", "Shared totals readable", value=1)
        results = [("accepted",), ("duplicate",), ("refused",)]
        yield counter_family(totals, INGEST_SAMPLES, "Telemetry samples received", ["result"], results)
        yield counter_family(totals, INGEST_BATCHES, "Telemetry batches received", ["result"], results[::2])
        yield histogram_family(totals, INGEST_SECONDS, "Time to validate and store one batch", INGEST_BUCKETS)
        yield histogram_family(
            totals, PUSH_LAG, "From a frame leaving broadcast.py to its websocket send", PUSH_BUCKETS
        )


class InventoryCollector(Collector):
    """Nodes and GPUs by state, read at scrape time."""

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily("gpuportal_nodes", ""), GaugeMetricFamily("gpuportal_gpus", "")]

    def collect(self) -> Iterator[Metric]:
        from gpu import selectors

        nodes = GaugeMetricFamily("gpuportal_nodes", "Nodes by state", labels=["state"])
        qs = selectors.node_list()
        nodes.add_metric(["cordoned"], qs.filter(cordoned=True).count())
        nodes.add_metric(["schedulable"], qs.filter(cordoned=False).count())
        yield nodes
        gpus = GaugeMetricFamily("gpuportal_gpus", "GPUs by health and service", labels=["health", "service"])
        counts = selectors.gpus_by_state()
        for health in GpuHealth.values:  # every pair, zeros too: an alert on unhealthy GPUs needs the 0
            for service in ("in", "out"):
                gpus.add_metric([health, service], counts.get(f"{health}:{service}", 0))
        yield gpus


_registered = False


def _register() -> None:
    global _registered
    if not _registered:
        REGISTRY.register(InventoryCollector())
        REGISTRY.register(SharedCountersCollector())
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
