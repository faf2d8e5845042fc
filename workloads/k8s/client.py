"""The small interface between the portal and the Kubernetes API, and its real implementation.

Everything is path based and returns plain dicts parsed with orjson from the raw response
(`_preload_content=False`): the official client's model decoding is several times slower and
heavier than the JSON itself (the cold-sync benchmark, `docs/benchmarks/README.md`), and the reconcilers
only need a few fields. `KubeClient` is a Protocol so unit tests may use a fake; the behaviours
are also tested against the real local control plane.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any, Protocol

import orjson
import urllib3
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from workloads.k8s import aio
from workloads.k8s.errors import K8sError, K8sTransientError, error_for
from workloads.k8s.labels import FIELD_MANAGER

log = logging.getLogger(__name__)
JSON = dict[str, Any]


class KubeClient(Protocol):
    def get(self, path: str, query: dict[str, str] | None = None) -> JSON | None:
        """The object at path, or None on 404."""

    def list_raw(self, path: str, query: dict[str, str] | None = None) -> bytes:
        """The raw JSON body of a list."""

    def create(self, path: str, body: JSON, *, dry_run: bool = False) -> JSON | None:
        """POST; None when the object already exists (409 AlreadyExists counts as success)."""

    def patch(self, path: str, body: JSON, *, apply: bool = False) -> JSON:
        """JSON merge patch, or server-side apply (fixed field manager, forced) when apply=True."""

    def replace(self, path: str, body: JSON) -> JSON:
        """PUT with the body's resourceVersion (optimistic concurrency; 409 on conflict)."""

    def delete(self, path: str, *, propagation: str = "Background") -> bool:
        """DELETE; False when it was already gone."""

    def stream(self, path: str, query: dict[str, str] | None = None, timeout: float = 330) -> Iterator[bytes]:
        """A long response (watch, followed logs) as lines."""

    def read_bytes(self, path: str, query: dict[str, str] | None = None) -> bytes:
        """A non-JSON body (pod logs)."""

    def astream(self, path: str, query: dict[str, str] | None = None) -> AsyncIterator[bytes]:
        """A long body (a followed log) as raw chunks, read on the event loop without a thread."""

    def read_tail(self, path: str, query: dict[str, str] | None, limit: int) -> tuple[bytes, bool]:
        """The last `limit` bytes of a body (a log), and whether anything before them was dropped;
        read through a ring buffer, so memory stays bounded however long the body is."""


def _load_api_client() -> k8s.ApiClient:
    path = settings.GPUPORTAL_KUBECONFIG
    if not path and os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return k8s.ApiClient(configuration)
    if not path:
        raise K8sError(0, "No cluster configured: set GPUPORTAL_KUBECONFIG (or run in a pod).")
    api: k8s.ApiClient = k8s_config.new_client_from_config(config_file=path)  # type: ignore[no-untyped-call]
    return api


class RealKubeClient:
    """KubeClient over the official client's connection handling, with raw JSON bodies."""

    def __init__(self, api_client: k8s.ApiClient | None = None, *, timeout: float = 30) -> None:
        self.api = api_client or _load_api_client()
        self.timeout = timeout

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
    ) -> urllib3.BaseHTTPResponse:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        params = list((query or {}).items())
        _, url, headers, _, _ = self.api.param_serialize(
            method, path, query_params=params, header_params=headers, auth_settings=["BearerToken"]
        )
        try:
            rest = self.api.call_api(
                method, url, header_params=headers, body=body, _request_timeout=timeout or self.timeout
            )
        except (urllib3.exceptions.HTTPError, OSError, k8s.ApiException) as exc:
            raise K8sTransientError(0, str(exc)) from exc
        response: urllib3.BaseHTTPResponse = rest.response
        if response.status >= 300:
            data = response.read()
            response.release_conn()
            raise error_for(response.status, data.decode(errors="replace"))
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> JSON:
        response = self._call(method, path, **kwargs)
        try:
            data = response.read()
        finally:
            response.release_conn()
        parsed: JSON = orjson.loads(data) if data else {}
        return parsed

    def get(self, path: str, query: dict[str, str] | None = None) -> JSON | None:
        try:
            return self._json("GET", path, query=query)
        except K8sError as exc:
            if exc.status == 404:
                return None
            raise

    def list_raw(self, path: str, query: dict[str, str] | None = None) -> bytes:
        response = self._call("GET", path, query=query, timeout=(10, 300))
        try:
            return bytes(response.read())
        finally:
            response.release_conn()

    def create(self, path: str, body: JSON, *, dry_run: bool = False) -> JSON | None:
        query = {"fieldManager": FIELD_MANAGER, **({"dryRun": "All"} if dry_run else {})}
        try:
            return self._json("POST", path, body=body, query=query)
        except K8sError as exc:
            if exc.status == 409 and "AlreadyExists" in exc.message:
                return None
            raise

    def patch(self, path: str, body: JSON, *, apply: bool = False) -> JSON:
        query = {"fieldManager": FIELD_MANAGER}
        if apply:
            query["force"] = "true"
        kind = "application/apply-patch+yaml" if apply else "application/merge-patch+json"
        return self._json("PATCH", path, body=body, query=query, content_type=kind)

    def replace(self, path: str, body: JSON) -> JSON:
        return self._json("PUT", path, body=body, query={"fieldManager": FIELD_MANAGER})

    def delete(self, path: str, *, propagation: str = "Background") -> bool:
        try:
            self._json(
                "DELETE",
                path,
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
            )
        except K8sError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def stream(self, path: str, query: dict[str, str] | None = None, timeout: float = 330) -> Iterator[bytes]:
        response = self._call("GET", path, query=query, timeout=(10, timeout))
        return LineStream(response)

    def read_bytes(self, path: str, query: dict[str, str] | None = None) -> bytes:
        response = self._call("GET", path, query=query)
        try:
            return bytes(response.read())
        finally:
            response.release_conn()

    def astream(self, path: str, query: dict[str, str] | None = None) -> AsyncIterator[bytes]:
        return aio.stream_chunks(self.api.configuration, path, dict(query or {}))

    def read_tail(self, path: str, query: dict[str, str] | None, limit: int) -> tuple[bytes, bool]:
        response = self._call("GET", path, query=query, timeout=(10, 300))
        kept, cut = bytearray(), False
        try:
            for chunk in response.stream(64 * 1024, decode_content=True):
                kept += chunk
                if len(kept) > limit:
                    del kept[: len(kept) - limit]
                    cut = True
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise K8sTransientError(0, f"read broken: {exc}") from exc
        finally:
            response.release_conn()
        return bytes(kept), cut


class LineStream:
    """A long body's lines. `shutdown`, from another thread, ends a read that waits for the next line
    (a watch at stop, which would otherwise wait for the API server's next bookmark, up to a minute)."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self._response = response
        self._lines = _lines(response)

    def __iter__(self) -> LineStream:
        return self

    def __next__(self) -> bytes:
        return next(self._lines)

    def close(self) -> None:
        self._lines.close()

    def shutdown(self) -> None:
        # urllib3 refuses (ValueError, RuntimeError) once the body ended and the connection went back
        # to the pool: then there is no read to end, and the pooled socket must not be touched.
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self._response.shutdown()


def _lines(response: urllib3.BaseHTTPResponse) -> Generator[bytes]:
    """Split a chunked body into lines; closing the generator closes the connection."""
    buffer = b""
    try:
        for chunk in response.stream(64 * 1024, decode_content=True):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield line
        if buffer.strip():
            yield buffer
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise K8sTransientError(0, f"stream broken: {exc}") from exc
    finally:
        response.release_conn()


_default: KubeClient | None = None
_default_lock = threading.Lock()


def get_client() -> KubeClient:
    """The process-wide client (tests swap it with `set_client`)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = RealKubeClient()
        return _default


def set_client(kube: KubeClient | None) -> None:
    global _default
    with _default_lock:
        _default = kube
