"""An in-memory KubeClient for unit tests: records every call; the real cluster tests cover the rest."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson

from workloads.k8s.errors import K8sError


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.logs: dict[str, bytes] = {}
        self.rv = 100
        # Cluster-wide lists the admission queue reads: two 4-GPU nodes, like the local cluster.
        self.nodes: list[dict[str, Any]] = [fake_node("kwok-gpu-0"), fake_node("kwok-gpu-1")]

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        return obj

    def get(self, path: str, query: dict[str, str] | None = None) -> dict[str, Any] | None:
        self.calls.append(("GET", path))
        if path == "/api/v1/nodes":
            by_name = sorted(self.nodes, key=lambda n: str(n["metadata"]["name"]))  # as the API server lists
            return {"items": orjson.loads(orjson.dumps(by_name))}
        if path == "/api/v1/pods":
            return {"items": [o for p, o in self.objects.items() if "/pods/" in p]}
        if path in self.objects:
            copy: dict[str, Any] = orjson.loads(orjson.dumps(self.objects[path]))
            return copy
        prefix = path.rstrip("/") + "/"
        items = [o for p, o in self.objects.items() if p.startswith(prefix) and "/" not in p[len(prefix) :]]
        if path.endswith(("/pods", "/jobs", "/events")):
            selector = (query or {}).get("labelSelector", "")  # equality terms, comma-separated
            for term in filter(None, selector.split(",")):
                key, _, value = term.partition("=")
                items = [o for o in items if o.get("metadata", {}).get("labels", {}).get(key) == value]
            return {"items": items, "metadata": {"resourceVersion": str(self.rv)}}
        return None

    def list_raw(self, path: str, query: dict[str, str] | None = None) -> bytes:
        self.calls.append(("LIST", path))
        return orjson.dumps(self.get(path, query) or {"items": [], "metadata": {"resourceVersion": "1"}})

    def create(self, path: str, body: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any] | None:
        self.calls.append(("POST", path))
        if dry_run:
            return body
        full = f"{path}/{body['metadata']['name']}"
        if full in self.objects:
            return None
        self.objects[full] = self._bump(orjson.loads(orjson.dumps(body)))
        made: dict[str, Any] = orjson.loads(orjson.dumps(self.objects[full]))  # a copy, as the wire gives
        return made

    def patch(self, path: str, body: dict[str, Any], *, apply: bool = False) -> dict[str, Any]:
        self.calls.append(("PATCH", path))
        current = self.objects.setdefault(path, {})
        _merge(current, body)
        return self._bump(current)

    def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("PUT", path))
        current = self.objects.get(path)
        if current and current["metadata"].get("resourceVersion") != body["metadata"].get("resourceVersion"):
            raise K8sError(409, "Conflict")
        self.objects[path] = self._bump(orjson.loads(orjson.dumps(body)))
        return self.objects[path]

    def delete(self, path: str, *, propagation: str = "Background") -> bool:
        self.calls.append(("DELETE", path))
        return self.objects.pop(path, None) is not None

    def stream(self, path: str, query: dict[str, str] | None = None, timeout: float = 330) -> Iterator[bytes]:
        self.calls.append(("STREAM", path))
        yield from self.logs.get(path, b"").splitlines()

    async def astream(self, path: str, query: dict[str, str] | None = None) -> AsyncIterator[bytes]:
        self.calls.append(("ASTREAM", path))
        if path not in self.logs:
            raise K8sError(404, "not found")
        yield self.logs[path]

    def read_tail(self, path: str, query: dict[str, str] | None, limit: int) -> tuple[bytes, bool]:
        data = self.read_bytes(path, query)
        return data[-limit:], len(data) > limit

    def read_bytes(self, path: str, query: dict[str, str] | None = None) -> bytes:
        self.calls.append(("READ", path))
        if path not in self.logs:
            raise K8sError(404, "not found")
        return self.logs[path]


def fake_node(name: str, gpus: int = 4, slices: int = 16) -> dict[str, Any]:
    alloc = {"nvidia.com/gpu": str(gpus), "nvidia.com/gpu.shared": str(slices)}
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-5090"}},
        "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _merge(into: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
