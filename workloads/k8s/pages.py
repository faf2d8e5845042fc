"""Listing a collection page by page (`limit` + `continue`), keeping only what the caller needs,
so neither a relist nor a sweep over 20,000 objects ever holds one 100 MB response."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from workloads.k8s.client import KubeClient

Obj = dict[str, Any]


@contextmanager
def pause_collection() -> Iterator[None]:
    """A big decode allocates hundreds of thousands of objects the collector cannot free; without a
    pause it would run many times over them. Paused, not frozen: `gc.unfreeze()` would also thaw what
    the process froze at start (portal/gcfreeze.py), and its next full collection
    would walk all of it again. Nested pauses leave the collector to the outermost."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def pages(client: KubeClient, path: str, query: dict[str, str], *, page_size: int = 500) -> Iterator[Obj]:
    """Each page of one consistent list, decoded; the first page's metadata holds its resourceVersion."""
    page_query = {**query, "limit": str(page_size)}
    while True:
        raw = client.list_raw(path, page_query)
        with pause_collection():
            page: Obj = orjson.loads(raw)
        yield page
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return
        page_query["continue"] = token


def list_all(
    client: KubeClient, path: str, query: dict[str, str], *, keep: Callable[[Obj], Obj], page_size: int = 500
) -> list[Obj]:
    return [
        keep(item)
        for page in pages(client, path, query, page_size=page_size)
        for item in page.get("items") or []
    ]


def metadata_only(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "labels") if k in meta}}
