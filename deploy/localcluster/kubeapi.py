"""A minimal Kubernetes REST client for the cluster tooling.

Why not the `kubernetes` package: the import-linter contract keeps that client inside
`workloads.k8s`, and this module needs only a handful of verbs. It reads the kubeconfig that
kwokctl wrote (client-certificate auth against a private CA) and keeps one HTTPS connection per
thread, so node creation can fan out over a small thread pool.
"""

from __future__ import annotations

import base64
import http.client
import ssl
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import yaml

JSON = dict[str, Any]


class KubeApiError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}")
        self.status = status


def _material(entry: dict[str, Any], key: str, base: Path, tmp: Path) -> str | None:
    """Return a file path for `key` or `key-data` (written to tmp), as ssl wants files."""
    if entry.get(key):
        return str((base / entry[key]).resolve())
    data = entry.get(f"{key}-data")
    if not data:
        return None
    out = tmp / key
    out.write_bytes(base64.b64decode(data))
    return str(out)


class KubeApi:
    def __init__(self, kubeconfig: Path, timeout: float = 30.0) -> None:
        doc = yaml.safe_load(kubeconfig.read_text())
        ctx_name = doc["current-context"]
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        self._tmp = tempfile.TemporaryDirectory(prefix="kubeapi-")
        tmp, base = Path(self._tmp.name), kubeconfig.parent
        self._ssl = ssl.create_default_context(cafile=_material(cluster, "certificate-authority", base, tmp))
        cert = _material(user, "client-certificate", base, tmp)
        if cert:
            self._ssl.load_cert_chain(cert, _material(user, "client-key", base, tmp))
        url = urlsplit(cluster["server"])
        self._host, self._port = url.hostname or "127.0.0.1", url.port or 443
        self._timeout = timeout
        self._local = threading.local()

    @property
    def server(self) -> str:
        return f"https://{self._host}:{self._port}"

    def _conn(self) -> http.client.HTTPSConnection:
        conn: http.client.HTTPSConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(
                self._host, self._port, context=self._ssl, timeout=self._timeout
            )
            self._local.conn = conn
        return conn

    def raw(self, method: str, path: str, payload: bytes | None = None, content_type: str = "") -> bytes:
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = content_type or "application/json"
        try:
            status, data = self._send(method, path, payload, headers)
        except (ConnectionError, http.client.HTTPException):
            # A keep-alive connection the server closed: retry once on a fresh one.
            self._local.conn = None
            status, data = self._send(method, path, payload, headers)
        if status >= 300:
            raise KubeApiError(status, data.decode(errors="replace"))
        return data

    def request(self, method: str, path: str, body: JSON | None = None, content_type: str = "") -> JSON:
        data = self.raw(method, path, None if body is None else orjson.dumps(body), content_type)
        return orjson.loads(data) if data else {}

    def _send(
        self, method: str, path: str, payload: bytes | None, headers: dict[str, str]
    ) -> tuple[int, bytes]:
        conn = self._conn()
        conn.request(method, path, body=payload, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()

    def get(self, path: str) -> JSON:
        return self.request("GET", path)

    def create(self, path: str, body: JSON) -> JSON | None:
        """POST; an existing object (409) is not an error, so callers stay idempotent."""
        try:
            return self.request("POST", path, body)
        except KubeApiError as exc:
            if exc.status == 409:
                return None
            raise

    def create_namespace(self, name: str, timeout: float = 120.0) -> None:
        """Create a namespace (idempotent) and wait for its default ServiceAccount: a pod created
        before the controller-manager makes it is refused (403), and a busy control plane (hundreds
        of nodes just added) can take seconds to."""
        self.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        self.wait_default_service_account(name, timeout)

    def wait_default_service_account(self, namespace: str, timeout: float = 120.0) -> None:
        """Wait until the controller-manager has made the namespace's default ServiceAccount."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
                return
            except KubeApiError as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)

    def delete(self, path: str) -> None:
        try:
            self.request("DELETE", path)
        except KubeApiError as exc:
            if exc.status != 404:
                raise

    def close(self) -> None:
        self._tmp.cleanup()
