"""Counters shared by every process of one portal (web replicas, workers, the controller), in Redis.

A prometheus-client `Counter` lives in one process: with several web replicas behind one Service,
each scrape would land on another replica and the series would jump up and down. These totals are
one Redis hash per portal instead, `gpuportal:metrics:<database name>` (two portals, or two test
runs, sharing a Redis keep apart), with a field per metric and label values. Whoever counts adds
with HINCRBYFLOAT (one pipelined round trip); /metrics reads the whole hash (HGETALL) at scrape
time, so every replica answers the same totals and a restarted process takes none with it.

Counting never fails its caller, and async code and the hot ingest path count without I/O (`defer`:
a thread of the process sends it within a second, and at exit). When Redis does not answer, the
increments wait in this process (`_pending`) and go out with the next successful write, and Redis is
not tried again for `RETRY_AFTER_S` (an outage must not add a socket timeout to every ingest).
Totals only grow, except when Redis itself loses its data (a restart without persistence):
Prometheus reads that as a counter reset, as after a process restart.

Without REDIS_URL (the embedded demo: one process) the hash is a dict in this process.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Mapping

import redis
from django.conf import settings
from django.db import connections

log = logging.getLogger(__name__)
SEP = "\x1f"  # between a field's metric name and its label values; no label value contains it
RETRY_AFTER_S = 5.0
FLUSH_EVERY_S = 1.0  # deferred counts (the event loop's) leave this process within this
TIMEOUT_S = 0.5
Increments = dict[str, float]


class CountersUnavailable(Exception):
    """Redis did not answer a read: /metrics omits the shared totals rather than show zeros."""


_lock = threading.Lock()
_pending: Increments = {}
_memory: Increments = {}
_client: tuple[str, redis.Redis] | None = None
_down_until = 0.0
_flusher_pid = 0


def field(metric: str, labels: tuple[str, ...] = ()) -> str:
    return SEP.join((metric, *labels))


def _key() -> str:
    return f"gpuportal:metrics:{connections['default'].settings_dict['NAME']}"


def _redis() -> redis.Redis | None:
    global _client
    url = settings.REDIS_URL
    if not url:
        return None
    if _client is None or _client[0] != url:
        _client = (url, redis.Redis.from_url(url, socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S))
    return _client[1]


def _merge(into: Increments, more: Mapping[str, float]) -> None:
    for name, n in more.items():
        into[name] = into.get(name, 0.0) + n


def add(increments: Mapping[str, float]) -> bool:
    """Add to the shared totals (with whatever an earlier failed write left); False if it waits."""
    global _down_until
    client = _redis()
    with _lock:
        _merge(_pending, increments)
        if client is None:
            _merge(_memory, _pending)
            _pending.clear()
            return True
        if time.monotonic() < _down_until:
            return False
        batch = dict(_pending)
        _pending.clear()
    if not batch:
        return True
    try:
        pipe = client.pipeline(transaction=True)  # MULTI: a histogram's buckets and sum move together
        for name, n in batch.items():
            pipe.hincrbyfloat(_key(), name, n)
        pipe.execute()
    except redis.RedisError:
        with _lock:
            _merge(_pending, batch)
            _down_until = time.monotonic() + RETRY_AFTER_S
        log.warning("shared counters: Redis did not answer; %d totals wait in this process", len(batch))
        return False
    return True


def defer(increments: Mapping[str, float]) -> None:
    """Count without I/O (for async code: the websocket consumers' event loop must not wait on
    Redis); a thread of this process sends it within FLUSH_EVERY_S, and at exit."""
    with _lock:
        _merge(_pending, increments)
    _start_flusher()


def _start_flusher() -> None:
    global _flusher_pid
    with _lock:
        if _flusher_pid == os.getpid():  # one per process; a forked child starts its own
            return
        _flusher_pid = os.getpid()
    threading.Thread(target=_flush_loop, name="shared-counters", daemon=True).start()


def _flush_loop() -> None:
    while True:
        time.sleep(FLUSH_EVERY_S)
        try:
            flush()
        except Exception:  # the thread must outlive any one failure, or deferred counts stay here
            log.warning("shared counters: flush failed", exc_info=True)


def flush() -> bool:
    """Send what waits in this process (deferred, or left by a failed write)."""
    return add({}) if _pending else True


atexit.register(flush)


def count(metric: str, labels: tuple[str, ...] = (), n: float = 1) -> None:
    if n:
        add({field(metric, labels): n})


def observe(metric: str, value: float, *, buckets: tuple[float, ...], deferred: bool = False) -> None:
    """One observation of a histogram: its bucket (the first bound at or above it, else +Inf) and sum."""
    bound = next((b for b in buckets if value <= b), None)
    le = "+Inf" if bound is None else repr(float(bound))
    (defer if deferred else add)({field(metric, ("le", le)): 1, field(metric, ("sum",)): value})


def read() -> dict[str, float]:
    """Every shared total of this portal, by field; raises CountersUnavailable when Redis is down.
    What this process deferred is sent first, so its own counts are never a second behind."""
    flush()
    client = _redis()
    if client is None:
        with _lock:
            return dict(_memory)
    try:
        raw = client.hgetall(_key())
    except redis.RedisError as exc:
        raise CountersUnavailable(str(exc)) from exc
    return {(k.decode() if isinstance(k, bytes) else str(k)): float(v) for k, v in raw.items()}


def clear() -> None:
    """Forget every total of this portal (tests start from zero)."""
    client = _redis()
    with _lock:
        _pending.clear()
        _memory.clear()
    if client is not None:
        client.delete(_key())


def series(totals: Mapping[str, float], metric: str) -> dict[tuple[str, ...], float]:
    """One metric's totals by label values, from what `read` returned."""
    out: dict[tuple[str, ...], float] = {}
    for name, n in totals.items():
        head, *labels = name.split(SEP)
        if head == metric:
            out[tuple(labels)] = n
    return out


def histogram(
    totals: Mapping[str, float], metric: str, buckets: tuple[float, ...]
) -> tuple[list[tuple[str, float]], float]:
    """A histogram's cumulative (le, count) pairs, +Inf last, and its sum, from what `read` returned."""
    own = series(totals, metric)
    per = {labels[1]: n for labels, n in own.items() if labels[:1] == ("le",)}
    out, running = [], 0.0
    for bound in buckets:
        running += per.pop(repr(float(bound)), 0.0)
        out.append((repr(float(bound)), running))
    out.append(("+Inf", running + sum(per.values())))  # +Inf, and bounds a newer release dropped
    return out, own.get(("sum",), 0.0)
