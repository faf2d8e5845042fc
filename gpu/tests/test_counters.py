"""The shared counters (gpu/counters.py): totals in Redis that survive an outage of it, and what
/metrics shows while Redis does not answer."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import Client, override_settings

from gpu import app_settings, counters, metrics

pytestmark = pytest.mark.django_db
TOKEN = "counters-test-token-0123456789"
DEAD_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    counters.clear()
    yield
    counters._down_until = 0.0
    counters.clear()


def test_totals_add_up_by_labels() -> None:
    counters.count("gpuportal_test", ("a",), 2)
    counters.count("gpuportal_test", ("a",), 3)
    counters.count("gpuportal_test", ("b",))
    assert counters.series(counters.read(), "gpuportal_test") == {("a",): 5, ("b",): 1}


def test_a_histogram_reads_cumulative_with_its_sum() -> None:
    for value in (0.001, 0.3, 0.3, 7.0):
        counters.observe("gpuportal_test_seconds", value, buckets=(0.01, 0.5, 1.0))
    buckets, total = counters.histogram(counters.read(), "gpuportal_test_seconds", (0.01, 0.5, 1.0))
    assert buckets == [("0.01", 1), ("0.5", 3), ("1.0", 3), ("+Inf", 4)]
    assert total == pytest.approx(7.601)


def test_counts_made_while_redis_is_down_arrive_once_it_answers() -> None:
    with override_settings(REDIS_URL=DEAD_REDIS):
        counters.count("gpuportal_test", ("a",), 4)  # never raises
        with pytest.raises(counters.CountersUnavailable):
            counters.read()
        counters.count("gpuportal_test", ("a",), 1)  # waits too, without trying Redis again
    assert "gpuportal_test\x1fa" not in counters.read()
    counters._down_until = 0.0  # the retry pause is over
    counters.count("gpuportal_test", ("a",), 2)
    assert counters.series(counters.read(), "gpuportal_test") == {("a",): 7}


@override_settings(GPU_METRICS_TOKEN=TOKEN)
def test_metrics_say_when_the_shared_totals_cannot_be_read() -> None:
    metrics.ingested(node="n", accepted=1, duplicates=0, seconds=0.02)
    with override_settings(REDIS_URL=DEAD_REDIS):
        down = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    counters._down_until = 0.0  # the retry pause is over: the deferred count goes out with the next read
    up = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    assert "gpuportal_shared_counters_up 0.0" in down
    assert "gpuportal_ingest_seconds_count" not in down  # not shown as zeros
    assert "gpuportal_shared_counters_up 1.0" in up
    assert "gpuportal_ingest_seconds_count 1.0" in up


def test_two_portals_on_one_redis_keep_their_own_totals(monkeypatch: pytest.MonkeyPatch) -> None:
    counters.count("gpuportal_test", ("a",), 1)
    with monkeypatch.context() as m:
        m.setitem(connection.settings_dict, "NAME", "another_portal")
        counters.count("gpuportal_test", ("a",), 10)
        assert counters.series(counters.read(), "gpuportal_test") == {("a",): 10}
        counters.clear()
    assert counters.series(counters.read(), "gpuportal_test") == {("a",): 1}


def test_deferred_counts_are_sent_by_the_process_own_thread() -> None:
    counters.defer({counters.field("gpuportal_test", ("a",)): 3})  # no I/O here (the event loop's way)
    for _ in range(100):  # the flusher sends within FLUSH_EVERY_S; wait for it, without timing it
        if counters.series(counters.read(), "gpuportal_test"):
            break
        time.sleep(0.1)
    assert counters.series(counters.read(), "gpuportal_test") == {("a",): 3}
    assert not counters._pending


def test_a_batch_refused_unread_counts_as_one_refused_batch(client: Client) -> None:
    from gpu.tests.factories import make_node, node_token

    node = make_node()
    auth = {"Authorization": f"Bearer {node_token(node)}"}
    too_big = b"[" + b" " * (app_settings.max_body_bytes() + 1) + b"]"
    for body in (too_big, b"{not json"):
        response = client.post("/api/v1/ingest/samples", body, content_type="application/json", headers=auth)
        assert response.status_code == 400, response.content
    totals = counters.read()
    assert counters.series(totals, metrics.INGEST_BATCHES) == {("refused",): 2.0}
    assert counters.series(totals, metrics.INGEST_SAMPLES) == {}
