"""After a broker outage the worker and beat retry every 2 s at most, not kombu's 30 (portal/broker.py):
the app's connections are the prompt kind, and against a refused port their retries say so."""

from __future__ import annotations

from pathlib import Path

import pytest
from kombu import Connection, Exchange, Queue
from kombu.exceptions import OperationalError

from portal.broker import RECONNECT_MAX_S, PromptConnection
from portal.celery import app
from tests.gpu_e2e.live import free_port
from tests.workloads_e2e.procs import PrivateRedis


def test_the_worker_and_beat_connect_through_the_prompt_connection() -> None:
    # The worker's consumer and beat both take their connection from these two.
    assert isinstance(app.connection_for_read(), PromptConnection)
    assert isinstance(app.connection_for_write(), PromptConnection)


def test_a_refused_broker_is_tried_again_within_two_seconds() -> None:
    """What the worker's consumer and beat pass (an error callback and a retry count), against a port
    nothing listens on: the waits between tries grow to RECONNECT_MAX_S and stay there."""
    waits: list[float] = []
    conn = app.connection_for_write(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(OperationalError):
        conn.ensure_connection(lambda exc, interval: waits.append(interval), 4)
    assert waits == [1, 2, 2, 2], waits
    assert max(waits) == RECONNECT_MAX_S


def test_a_caller_that_names_its_intervals_keeps_them() -> None:
    waits: list[float] = []

    def errback(exc: Exception, interval: float) -> None:
        waits.append(interval)

    conn = app.connection_for_write(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(OperationalError):
        conn.ensure_connection(errback, 2, interval_start=0, interval_step=1, interval_max=1)
    assert waits == [0, 1], waits


def test_workers_and_beat_outlive_an_outage_of_any_length() -> None:
    """With a try every 2 s, a bounded count would be a bounded outage: Celery's default 100 tries
    would end the worker and beat 200 s into the 5-minute Redis outage drill. None: they retry until it is
    back (what the worker's consumer and beat pass as `max_retries`)."""
    assert app.conf.broker_connection_max_retries is None
    assert app.conf.broker_connection_retry is True


@pytest.mark.parametrize("cls", [Connection, PromptConnection])
def test_closing_a_lost_channel_with_unacked_messages_does_not_raise(
    cls: type[Connection], tmp_path: Path
) -> None:
    """The state that killed a drill's worker after Redis went away: a channel holding an unacked
    message, closed after the connection let its transport go (as `collect()` leaves it, which the
    consumer runs first). kombu's Redis channel then raises AttributeError; ours logs and goes on.
    Real Redis; the plain kombu connection shows the failure is kombu's, not the test's."""
    redis = PrivateRedis(tmp_path)
    redis.start()
    try:
        conn = cls(redis.url)
        queue = Queue("q", Exchange("q"), "q")
        with conn.Producer() as producer:
            producer.publish({"n": 1}, exchange=queue.exchange, routing_key="q", declare=[queue])
        taken: list[object] = []
        conn.Consumer([queue], callbacks=[lambda body, message: taken.append(message)]).consume()
        conn.drain_events(timeout=5)  # delivered, never acked
        assert len(taken) == 1
    finally:
        redis.stop()
    channel = conn.default_channel
    conn._do_close_transport()
    if cls is PromptConnection:
        conn.maybe_close_channel(channel)
    else:
        with pytest.raises(AttributeError):
            conn.maybe_close_channel(channel)
