"""The Celery app's broker connections, reconnecting promptly after an outage.

kombu's default reconnect backs off to one try every 30 s, and both the worker's consumer and beat
use that default. After a Redis outage of a few minutes a worker would then sit up to 30 s past the
broker's return before taking work, and beat as long before its next sweep: more than the two sweep
intervals in which the portal promises to agree with the cluster again (docs/reliability.md). Here a
broker that is down is tried every RECONNECT_MAX_S at most, a TCP connect per process, no load. A
caller that passes its own intervals keeps them. Each try also counts as alive for a worker's liveness
probe (portal/liveness.py): a worker waiting for its broker is not stuck.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery.app.amqp import AMQP
from kombu import Connection

from portal import liveness

log = logging.getLogger(__name__)
RECONNECT_MAX_S = 2


class PromptConnection(Connection):
    def _ensure_connection(
        self,
        errback: Callable[[Exception, float], None] | None = None,
        max_retries: int | None = None,
        interval_start: int = 1,
        interval_step: int = 1,
        interval_max: int = RECONNECT_MAX_S,
        callback: Callable[[], None] | None = None,
        reraise_as_library_errors: bool = True,
        timeout: int | None = None,
    ) -> PromptConnection:
        super()._ensure_connection(
            liveness.on_retry(errback),
            max_retries,
            interval_start,
            interval_step,
            interval_max,
            callback,
            reraise_as_library_errors,
            timeout,
        )
        return self

    def maybe_close_channel(self, channel: Any) -> None:
        """kombu ignores connection errors when it closes a channel; here also the AttributeError its
        Redis channel raises when, closing a lost connection, it rebuilds a pool from a transport
        already let go to put unacknowledged messages back. Let through, it killed the worker after
        a Redis outage ("Unrecoverable error", seen in an outage drill). Those messages stay in
        Redis's unacked index, which the visibility timeout restores; a Redis restarted empty has
        lost them anyway."""
        try:
            super().maybe_close_channel(channel)
        except AttributeError:
            log.warning("closing a lost broker channel: its unacked messages wait for the visibility timeout")


class PortalAMQP(AMQP):
    """Celery's AMQP helpers with the prompt connection (`Celery(amqp=...)`)."""

    Connection = PromptConnection
