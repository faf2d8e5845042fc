"""Listing a collection page by page (`limit` + `continue`), keeping only what the caller needs,
so a sweep over 20,000 Jobs never holds one 100 MB response."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from workloads.k8s.client import KubeClient

Obj = dict[str, Any]


def list_all(
    client: KubeClient, path: str, query: dict[str, str], *, keep: Callable[[Obj], Obj], page_size: int = 500
) -> list[Obj]:
    items: list[Obj] = []
    page_query = {**query, "limit": str(page_size)}
    while True:
        page = orjson.loads(client.list_raw(path, page_query))
        items.extend(keep(item) for item in page.get("items") or [])
        token = (page.get("metadata") or {}).get("continue")
        if not token:
            return items
        page_query["continue"] = token


def metadata_only(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "labels") if k in meta}}
