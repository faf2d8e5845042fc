"""Kubernetes probes: `/healthz` (the process answers) and `/readyz` (its database and Redis do).

A middleware first in the chain answers them, before the host check and the HTTPS redirect: the
kubelet probes over plain HTTP with the pod's IP as the host, which production settings refuse.
Nothing else is exposed: the answer names what failed, not how it is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 2.0


def _database_ok() -> bool:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:  # any failure means not ready; logged, never shown
        log.warning("readyz: the database does not answer", exc_info=True)
        return False
    finally:
        # A probe must not keep a connection a broken database would leave half-open.
        connections["default"].close_if_unusable_or_obsolete()


def _redis_ok() -> bool:
    url = settings.REDIS_URL
    if not url:  # the embedded demo has no Redis
        return True
    try:
        client = redis.Redis.from_url(
            url, socket_timeout=PROBE_TIMEOUT_S, socket_connect_timeout=PROBE_TIMEOUT_S
        )
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        log.warning("readyz: Redis does not answer", exc_info=True)
        return False


def readiness() -> dict[str, bool]:
    return {"database": _database_ok(), "redis": _redis_ok()}


def readyz_response() -> HttpResponse:
    checks = readiness()
    ready = all(checks.values())
    return JsonResponse({"ok": ready, "checks": checks}, status=200 if ready else 503)


class ProbeMiddleware:
    """Answers the two probe paths itself; everything else passes through untouched."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == "/healthz":
            return JsonResponse({"ok": True})
        if request.path == "/readyz":
            return readyz_response()
        return self.get_response(request)
