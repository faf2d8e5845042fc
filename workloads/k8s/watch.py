"""List + watch one kind, raw JSON all the way (shared by jobs, pods, events and nodes).

Protocol (Kubernetes API concepts, "Efficient detection of changes"):

1. LIST (raw bytes, orjson), hand the full list to `on_relist` (or one ADDED per item), and keep
   the *list's* resourceVersion, never an object's (kubernetes-client/python#819).
2. WATCH from it with bookmarks; each event goes to `on_event` and advances the resourceVersion.
3. A stream that ends (server timeout, cut connection) resumes from the last resourceVersion.
4. 410 Gone (as status or as an ERROR event) forgets the version and relists: at once the first
   time, then no more often than `min_relist_interval_s` (<= 6 relists a minute, no hot loop).
5. Other errors back off exponentially with jitter, capped; a full relist also runs every
   `relist_interval_s` anyway, since a level-triggered controller must not trust the stream alone.
6. A stream that ends at once with nothing in it (a proxy that closes watches, a server shedding
   load) backs off too: a clean end is not proof of health, and reconnecting at once would spin.

`current` says whether what the watch delivered is the cluster as it is, give or take the stream's
lag: true after a list and after each line of a stream resumed from the last resourceVersion (which
misses nothing); false after a failed round or one that ended at once with nothing in it, until the
next list or line; and false while no line has come for QUIET_LIMIT_S, since kube-apiserver sends a
bookmark about every minute (its cacher's bookmark frequency), so a longer silence is a stalled
stream. A reader of a watch-fed copy (`k8s.store`) trusts it only while this is true. (A backlog
replayed after a resume makes it true at its first line: the copy catches up within that replay.)
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from workloads.k8s.client import KubeClient
from workloads.k8s.errors import K8sError, K8sGoneError
from workloads.k8s.pages import pages, pause_collection

log = logging.getLogger(__name__)
Obj = dict[str, Any]
RELIST_HISTORY = 64  # relist times kept for the stats: enough for a rate, bounded for a long run
QUICK_END_S = 1.0  # a stream shorter than this with no line in it counts as a failed one
QUIET_LIMIT_S = 90.0  # bookmarks come about every 60 s; no line for this long means a stalled stream


@dataclass(frozen=True)
class WatchSpec:
    name: str  # "jobs", "pods", "events", "nodes", "pods-all"
    path: str  # e.g. "/apis/batch/v1/jobs", "/api/v1/pods", "/api/v1/events", "/api/v1/nodes"
    label_selector: str | None
    on_event: Callable[[str, Obj], None]  # (ADDED|MODIFIED|DELETED, raw object dict)
    on_relist: Callable[[list[Obj]], None] | None = None  # full list after (re)list
    # Optional: shrink each object as soon as it is decoded (keeps a 20k-pod relist small).
    transform: Callable[[Obj], Obj] | None = None
    page_size: int = 500


def deliver_list(spec: WatchSpec, items: list[Obj]) -> None:
    """A full list to the spec: its `on_relist`, or one ADDED per item when it has none."""
    if spec.on_relist is not None:
        spec.on_relist(items)
    else:
        for item in items:
            spec.on_event("ADDED", item)


@dataclass
class WatchStats:
    relists: int = 0
    events: int = 0
    gone: int = 0
    errors: int = 0
    relist_times: list[float] = field(default_factory=list)  # the last RELIST_HISTORY only
    last_relist_s: float = 0.0
    quick_ends: int = 0


class Watcher:
    """List + watch one WatchSpec, raw JSON, resume from resourceVersion, relist on 410, backoff."""

    def __init__(
        self,
        *,
        client: KubeClient,
        spec: WatchSpec,
        watch_timeout_s: int = 240,
        relist_interval_s: float = 600.0,
        min_relist_interval_s: float = 10.0,
        # 5 s, not client-go's 30: after an outage of the API server or the database the watch is back
        # within seconds of the link, so recovery rests on the sweep interval alone (the promise
        # in docs/reliability.md); four streams retrying every few seconds are no load on an API server.
        max_backoff_s: float = 5.0,
    ) -> None:
        self.client = client
        self.spec = spec
        self.watch_timeout_s = watch_timeout_s
        self.relist_interval_s = relist_interval_s
        self.min_relist_interval_s = min_relist_interval_s
        self.max_backoff_s = max_backoff_s
        self.stats = WatchStats()
        self.resource_version: str | None = None
        self._listed_at = 0.0
        self._relisted_after_gone_at = -1e9
        self._current = False
        self._heard_at = -1e9  # the last list or line
        self._stream: Iterator[bytes] | None = None

    @property
    def current(self) -> bool:
        return self._current and time.monotonic() - self._heard_at < QUIET_LIMIT_S

    def _heard(self) -> None:
        self._heard_at = time.monotonic()
        self._current = True

    def distrust(self) -> None:
        """What was delivered may not be the cluster any more (a failed round, a fresh start)."""
        self._current = False

    def _query(self) -> dict[str, str]:
        return {"labelSelector": self.spec.label_selector} if self.spec.label_selector else {}

    def _shrink(self, obj: Obj) -> Obj:
        (obj.get("metadata") or {}).pop("managedFields", None)  # the bulk of most objects; nobody reads it
        return self.spec.transform(obj) if self.spec.transform is not None else obj

    def _list_pages(self) -> tuple[list[Obj], str]:
        """All items, page by page (one consistent snapshot), and the list's resourceVersion."""
        items: list[Obj] = []
        version = ""
        for page in pages(self.client, self.spec.path, self._query(), page_size=self.spec.page_size):
            items.extend(self._shrink(item) for item in page.get("items") or [])
            version = version or str((page.get("metadata") or {}).get("resourceVersion", ""))
        return items, version

    def relist(self) -> str:
        """LIST (paged), deliver, and return the list's resourceVersion."""
        started = time.monotonic()
        # The collector paused until the list is delivered and dropped: each page's decode left
        # tens of thousands of live objects, and every pass of the collector over them (a young
        # collection per page, then older ones) cost about a quarter of a relist's CPU. Dropped
        # inside the pause, they are freed by their reference counts and never walked. The
        # pause covers the page requests too (the collector is per process): each is bounded by the
        # API server's one-minute request limit, and only cycles made meanwhile wait for it.
        with pause_collection():
            items, version = self._list_pages()
            deliver_list(self.spec, items)
            del items
        self.stats.relists += 1
        self.stats.last_relist_s = time.monotonic() - started
        self.stats.relist_times.append(time.time())
        del self.stats.relist_times[:-RELIST_HISTORY]
        self._listed_at = time.monotonic()
        self._heard()
        return version

    def _handle_line(self, line: bytes) -> None:
        event = orjson.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise K8sGoneError(410, str(obj.get("message", "")))
            raise K8sError(code, str(obj.get("message", "")))
        rv = obj.get("metadata", {}).get("resourceVersion")
        if kind != "BOOKMARK":
            self.stats.events += 1
            self.spec.on_event(str(kind), self._shrink(obj))
        if rv:
            self.resource_version = rv
        self._heard()

    def watch_once(self, stop: threading.Event) -> int:
        """Follow one watch stream until it ends, the stop is set, or a relist is due; returns how
        many lines it read."""
        query = {
            **self._query(),
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_timeout_s),
            "resourceVersion": self.resource_version or "",
        }
        lines = self._stream = self.client.stream(self.spec.path, query, timeout=self.watch_timeout_s + 30)
        read = 0
        try:
            if stop.is_set():  # set while the stream opened: `interrupt` may have come before it
                return read
            for line in lines:
                read += 1
                self._handle_line(line)
                if stop.is_set() or self._relist_due():
                    break
        finally:
            self._stream = None  # ended: nothing for `interrupt` to end (its connection may be reused)
            close = getattr(lines, "close", None)
            if close is not None:
                close()
        return read

    def interrupt(self) -> None:
        """End the stream's wait for its next line (from another thread, after the stop is set)."""
        shutdown = getattr(self._stream, "shutdown", None)
        if shutdown is not None:
            shutdown()

    def _relist_due(self) -> bool:
        return time.monotonic() - self._listed_at > self.relist_interval_s

    def _wait_before_relist(self, stop: threading.Event) -> None:
        since = time.monotonic() - self._relisted_after_gone_at
        if since < self.min_relist_interval_s:
            stop.wait(self.min_relist_interval_s - since)
        self._relisted_after_gone_at = time.monotonic()

    def step(self, stop: threading.Event) -> bool:
        """One list-or-watch round; raises what the loop in `run` handles. False when the stream
        ended at once with nothing in it (the loop backs off as for an error)."""
        try:
            if self.resource_version is None or self._relist_due():
                self.resource_version = self.relist()
            started = time.monotonic()
            read = self.watch_once(stop)
        except BaseException:
            self.distrust()
            raise
        quick = read == 0 and time.monotonic() - started < QUICK_END_S and not stop.is_set()
        if quick:
            self.distrust()
            self.stats.quick_ends += 1
        return not quick

    def run(self, stop: threading.Event) -> None:
        backoff = 0.5
        while not stop.is_set():
            try:
                healthy = self.step(stop)
            except K8sGoneError:
                self.stats.gone += 1
                log.info("watch %s: 410 Gone, relisting", self.spec.name)
                self.resource_version = None
                self._wait_before_relist(stop)
                continue
            except Exception:
                if stop.is_set():
                    return  # the stream was ended by `interrupt`, at stop: nothing went wrong
                self.stats.errors += 1
                log.warning("watch %s failed; retrying in %.1f s", self.spec.name, backoff, exc_info=True)
                healthy = False
            else:
                if not healthy:
                    log.info("watch %s ended at once; reconnecting in %.1f s", self.spec.name, backoff)
            if healthy:
                backoff = 0.5
                continue
            stop.wait(backoff * (1 + random.random() / 2))  # noqa: S311 - jitter
            backoff = min(self.max_backoff_s, backoff * 2)
