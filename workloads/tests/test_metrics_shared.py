"""/metrics after a scripted scenario run by two worker processes at once: the ingest totals, the
push-lag histogram and the controller's watch counts are shared (gpu/counters.py), so the test
process and a third process scrape the same, exact numbers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from gpu import counters
from gpu.choices import GpuHealth
from gpu.models import Gpu, GpuSample
from gpu.tests.factories import batch, make_gpus, make_node, node_token, sample
from workloads.controller import loop
from workloads.tests import second_process
from workloads.tests.fakes import FakeKube

pytestmark = pytest.mark.django_db(transaction=True)
TOKEN = "metrics-shared-test-token-0123456789"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("gpuportal_")
    }


def _series(uuid: str, start: datetime, seconds: range, **kw: Any) -> list[dict[str, Any]]:
    return [sample(uuid, start + timedelta(seconds=i), **kw) for i in seconds]


def _plans() -> list[dict[str, Any]]:
    """A: 10 stored, then 3 new and 5 again, then a batch of 3 refused (one bad value); watches
    pods (2 expired, 1 failed round). B: 20 stored, then 2 refused (another node's name); watches
    pods (1 expired) and nodes (2 failed rounds)."""
    start = datetime.now(UTC) - timedelta(minutes=2)
    node_a, node_b = make_node("gpu-node-a", gpus=2), make_node("gpu-node-b", gpus=2)
    (a0, a1), (b0, _) = make_gpus(node_a, 2), make_gpus(node_b, 2)
    Gpu.objects.filter(pk=a1.pk).update(health=GpuHealth.UNHEALTHY, health_reason="XID 79")
    bad = [*_series(a0.uuid, start, range(20, 22)), sample(a0.uuid, start + timedelta(seconds=22), util=101)]
    plan_a = {
        "token": node_token(node_a),
        "batches": [
            batch(node_a.name, _series(a0.uuid, start, range(10))),
            batch(node_a.name, _series(a0.uuid, start, range(5, 13))),
            batch(node_a.name, bad),
        ],
        "push_lags": [0.02, 3.0],
        "watches": [{"kind": "pods", "gone": 2, "errors": 1}],
    }
    plan_b = {
        "token": node_token(node_b),
        "batches": [
            batch(node_b.name, _series(b0.uuid, start, range(20))),
            batch(node_a.name, _series(b0.uuid, start, range(30, 32))),
        ],
        "push_lags": [0.2],
        "watches": [{"kind": "pods", "gone": 1, "errors": 0}, {"kind": "nodes", "gone": 0, "errors": 2}],
    }
    return [plan_a, plan_b]


def _run_workers(plans: list[dict[str, Any]]) -> list[list[int]]:
    workers = [
        second_process.start(["-m", "workloads.tests.metrics_worker", orjson.dumps(p).decode()])
        for p in plans
    ]
    return [[int(line) for line in second_process.finish(w).split()] for w in workers]


def _expected() -> Samples:
    def one(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        return name, tuple(sorted(labels.items()))

    # kind: (relists, expired, failed rounds); a relist starts each watch and follows each 410
    watches = {"pods": (5, 3, 1), "nodes": (1, 0, 2), "jobs": (0, 0, 0), "events": (0, 0, 0)}
    names = ("gpuportal_watch_relists_total", "gpuportal_watch_expired_total", "gpuportal_watch_errors_total")
    out = {
        one(name, kind=kind): float(n)
        for kind, ns in watches.items()
        for name, n in zip(names, ns, strict=True)
    }
    for result, n in (("accepted", 33), ("duplicate", 5), ("refused", 5)):
        out[one("gpuportal_ingest_samples_total", result=result)] = n
    for result, n in (("accepted", 3), ("refused", 2)):
        out[one("gpuportal_ingest_batches_total", result=result)] = n
    out[one("gpuportal_ingest_seconds_count")] = 3
    lags = {
        "0.005": 0,
        "0.01": 0,
        "0.025": 1,
        "0.05": 1,
        "0.1": 1,
        "0.25": 2,
        "0.5": 2,
        "1.0": 2,
        "2.5": 2,
        "+Inf": 3,
    }
    for le, n in lags.items():
        out[one("gpuportal_push_lag_seconds_bucket", le=le)] = n
    out[one("gpuportal_push_lag_seconds_count")] = 3
    out[one("gpuportal_push_lag_seconds_sum")] = 3.22
    out[one("gpuportal_gpus", health="unhealthy", service="in")] = 1
    out[one("gpuportal_shared_counters_up")] = 1
    return out


@override_settings(GPU_METRICS_TOKEN=TOKEN)
def test_two_workers_figures_are_scraped_exactly_from_any_process() -> None:
    counters.clear()
    statuses = _run_workers(_plans())
    assert statuses == [[200, 200, 400], [200, 403]]
    # gpu_sample is unmanaged: a flush between tests leaves earlier tests' rows, so count this test's GPUs
    assert GpuSample.objects.filter(gpu_id__in=Gpu.objects.values("pk")).count() == 33
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    here, there = _samples(response.content.decode()), _samples(second_process.scrape(TOKEN))
    expected = _expected()
    assert {k: pytest.approx(here.get(k)) for k in expected} == expected
    assert here == there


def test_each_controller_tick_adds_what_its_watches_counted_since_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counters.clear()
    monkeypatch.setattr(loop, "admission_cycle", lambda *_, **__: None)
    monkeypatch.setattr(loop, "outbox_dispatch", lambda: None)
    controller = loop.Controller(client=FakeKube(), identity="test")
    pods = next(w for w in controller.watchers if w.spec.name == "pods")
    pods.stats.relists, pods.stats.gone = 2, 1
    controller.tick()
    controller.tick()  # nothing new
    pods.stats.relists, pods.stats.errors = 3, 4
    controller.tick()
    totals = counters.read()
    assert counters.series(totals, "gpuportal_watch_relists") == {("pods",): 3}
    assert counters.series(totals, "gpuportal_watch_expired") == {("pods",): 1}
    assert counters.series(totals, "gpuportal_watch_errors") == {("pods",): 4}
