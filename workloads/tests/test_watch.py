"""The watch loop against a scripted client: resume from the list's version, relist on 410."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from workloads.k8s import watch
from workloads.k8s.errors import K8sError, K8sGoneError
from workloads.k8s.watch import Watcher, WatchSpec


class Scripted:
    def __init__(self, streams: list[Any]) -> None:
        self.streams = streams
        self.lists = 0
        self.watch_versions: list[str] = []

    def list_raw(self, path: str, query: dict[str, str] | None = None) -> bytes:
        self.lists += 1
        items = [{"metadata": {"name": f"p{self.lists}", "resourceVersion": "5"}}]
        return orjson.dumps({"items": items, "metadata": {"resourceVersion": str(10 * self.lists)}})

    def stream(self, path: str, query: dict[str, str] | None = None, timeout: float = 0) -> Iterator[bytes]:
        self.watch_versions.append((query or {}).get("resourceVersion", ""))
        step = self.streams.pop(0) if self.streams else []
        if isinstance(step, Exception):
            raise step
        return iter(orjson.dumps(e) for e in step)


def test_it_resumes_from_the_last_version_and_relists_on_410() -> None:
    added = {"type": "ADDED", "object": {"metadata": {"name": "x", "resourceVersion": "11"}}}
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}
    gone = {"type": "ERROR", "object": {"code": 410, "message": "too old"}}
    client = Scripted([[added, bookmark], [gone], []])
    events: list[tuple[str, str]] = []
    relists: list[int] = []
    spec = WatchSpec(
        "pods",
        "/api/v1/pods",
        None,
        lambda k, o: events.append((k, o["metadata"]["name"])),
        lambda items: relists.append(len(items)),
    )
    watcher = Watcher(client=client, spec=spec, min_relist_interval_s=0)  # type: ignore[arg-type]
    stop = threading.Event()
    watcher.step(stop)
    assert client.watch_versions == ["10"]
    with pytest.raises(K8sGoneError):
        watcher.step(stop)
    assert client.watch_versions == ["10", "15"]
    watcher.resource_version = None
    watcher.step(stop)
    assert client.watch_versions == ["10", "15", "20"]  # the new list's version, never an object's
    assert events == [("ADDED", "x")]
    assert relists == [1, 1]


def _spec() -> WatchSpec:
    return WatchSpec("pods", "/api/v1/pods", None, lambda k, o: None, lambda items: None)


def test_a_stream_that_ends_at_once_and_empty_backs_off_instead_of_spinning() -> None:
    client = Scripted([])  # every watch ends at once with no line
    watcher = Watcher(client=client, spec=_spec(), max_backoff_s=0.4)  # type: ignore[arg-type]
    stop = threading.Event()
    runner = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    runner.start()
    stop.wait(2.0)
    stop.set()
    runner.join(5)
    # Back-off 0.5, 0.4, 0.4 ... s (with up to 50 % jitter): a handful of reconnects in 2 s, not thousands.
    assert 2 <= len(client.watch_versions) <= 6, len(client.watch_versions)
    assert watcher.stats.quick_ends == len(client.watch_versions)


def test_a_stream_with_events_resets_the_back_off() -> None:
    added = {"type": "ADDED", "object": {"metadata": {"name": "x", "resourceVersion": "11"}}}
    watcher = Watcher(client=Scripted([[added]]), spec=_spec())  # type: ignore[arg-type]
    assert watcher.step(threading.Event()) is True
    assert watcher.step(threading.Event()) is False  # the next one is empty and instant
    assert watcher.stats.quick_ends == 1


def test_the_relist_history_is_bounded() -> None:
    watcher = Watcher(client=Scripted([]), spec=_spec())  # type: ignore[arg-type]
    for _ in range(500):
        watcher.relist()
    assert watcher.stats.relists == 500
    assert len(watcher.stats.relist_times) == 64


def test_ten_thousand_events_leave_the_watcher_no_bigger() -> None:
    """Bounded memory: events pass through; nothing per event is kept (history included)."""
    import tracemalloc

    def events(n: int) -> list[dict[str, Any]]:
        return [
            {
                "type": "MODIFIED",
                "object": {
                    "metadata": {
                        "name": f"p{i}",
                        "resourceVersion": str(i),
                        "managedFields": [{"x": "y" * 200}],
                    }
                },
            }
            for i in range(n)
        ]

    client = Scripted([events(1_000), events(10_000)])
    watcher = Watcher(client=client, spec=_spec())  # type: ignore[arg-type]
    watcher.step(threading.Event())  # warm up: the first list and stream
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        watcher.step(threading.Event())
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert watcher.stats.events == 11_000
    assert grown < 64 * 1024, grown  # the 10,000 events themselves are over 2 MB


def test_current_holds_from_a_list_or_a_line_until_a_round_fails() -> None:
    added = {"type": "ADDED", "object": {"metadata": {"name": "x", "resourceVersion": "11"}}}
    client = Scripted([[added], K8sError(500, "etcd timeout"), [], [added]])
    watcher = Watcher(client=client, spec=_spec())  # type: ignore[arg-type]
    stop = threading.Event()
    assert not watcher.current  # nothing listed yet
    watcher.step(stop)  # a list, then a line
    assert watcher.current
    with pytest.raises(K8sError):
        watcher.step(stop)  # the watch fails: events may be missed until it is back
    assert not watcher.current
    watcher.step(stop)  # back, but ended at once with nothing: no proof yet
    assert not watcher.current
    watcher.step(stop)  # resumed from the last version and a line came: nothing was missed
    assert watcher.current
    assert client.lists == 1


def test_a_stream_silent_past_the_bookmark_interval_is_not_current(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(watch, "QUIET_LIMIT_S", 0.2)  # stands for 90 s: bookmarks come about every 60 s
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}}
    client = Scripted([[bookmark], [bookmark]])
    watcher = Watcher(client=client, spec=_spec())  # type: ignore[arg-type]
    watcher.step(threading.Event())
    assert watcher.current
    time.sleep(0.3)  # a stalled stream: connected, nothing arriving
    assert not watcher.current
    watcher.step(threading.Event())  # a bookmark: the stream is alive again
    assert watcher.current
