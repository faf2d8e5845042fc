"""A watch-fed copy of one kind of object (the store half of client-go's informer, no more).

Give its `on_event` and `on_relist` to a WatchSpec and it holds the objects the watch has seen,
by "namespace/name" ("/name" for a node), so a reader gets the cluster without a LIST. `keep` says
which objects it holds: an object that stops being kept (a pod that ended) is dropped, as is one
DELETED. A relist replaces everything, so an object deleted while the stream was down does not
linger.

It knows nothing of whether the stream is healthy: the Watcher does (`Watcher.current`), and a
reader falls back to a LIST when it is not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace') or ''}/{name}" if name else ""


class Store:
    def __init__(self, keep: Callable[[Obj], bool] | None = None) -> None:
        self._keep = keep or (lambda obj: True)
        self._objects: dict[str, Obj] = {}
        self._lock = threading.Lock()
        self.synced = False  # a full list has ever been applied (never reset: see Watcher.current)

    def on_event(self, kind: str, obj: Obj) -> None:
        key = _key(obj)
        if not key:
            return
        with self._lock:
            if kind == "DELETED" or not self._keep(obj):
                self._objects.pop(key, None)
            else:
                self._objects[key] = obj

    def on_relist(self, items: list[Obj]) -> None:
        fresh = {key: obj for obj in items if (key := _key(obj)) and self._keep(obj)}
        with self._lock:
            self._objects = fresh
            self.synced = True

    def items(self) -> list[Obj]:
        """A snapshot: later events do not change the list returned."""
        with self._lock:
            return list(self._objects.values())
