"""The local cluster's calls to its API server, through the official `kubernetes` client.

The client's own loader reads the kubeconfig kwokctl writes (a private CA and a client certificate).
One `ApiClient` serves a caller and all its threads: urllib3's pool gives each concurrent request its
own keep-alive connection, so the pool is sized for the widest fan-out (the benchmarks' 50 client
threads); a smaller pool would open and drop a connection per request beyond it.

Typed API classes where the call reads well (a namespace, its ServiceAccount). Manifests go as the
plain dicts the builders make and bodies come back as bytes, through the client's public
`param_serialize` and `call_api`: a generated method validates a dict body against its model (it
refuses a kwok Node's partial `nodeInfo`) and decodes every response into models, several times the
cost of the JSON itself for a long list; callers that want the objects decode the bytes with orjson.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import urllib3
from kubernetes import client, config

JSON = dict[str, Any]
POOL_SIZE = 64
TIMEOUT_S = 30.0  # per request: an API server that stopped answering fails the call, never hangs it
# What a call may raise: refused or timed out on the way (urllib3, the socket), or answered with an
# error status (`ApiException.status`; 0 for a TLS failure).
API_ERRORS = (OSError, urllib3.exceptions.HTTPError, client.ApiException)


@contextlib.contextmanager
def connected(kubeconfig: Path) -> Iterator[client.ApiClient]:
    """A client for the cluster of `kubeconfig`, for the caller and its threads; closed after the block."""
    configuration = client.Configuration()
    configuration.connection_pool_maxsize = POOL_SIZE  # read when the client makes its pool
    # The config loader is the one untyped corner of an otherwise typed client.
    api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), persist_config=False, client_configuration=configuration
    )
    try:
        yield api
    finally:
        api.close()  # type: ignore[no-untyped-call]


def call(
    api: client.ApiClient,
    method: str,
    path: str,
    body: JSON | None = None,
    *,
    query: dict[str, str] | None = None,
    content_type: str = "application/json",
    timeout: float = TIMEOUT_S,
) -> bytes:
    """One request; the response body as bytes. A status of 300 or more raises `ApiException`."""
    verb, url, headers, payload, _ = api.param_serialize(
        method,
        path,
        query_params=list((query or {}).items()),
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
    )
    sent = api.call_api(verb, url, header_params=headers, body=payload, _request_timeout=timeout)
    response: urllib3.BaseHTTPResponse = sent.response
    try:
        data = response.read()
    finally:
        response.release_conn()
    if response.status >= 300:
        raise client.ApiException(response.status, response.reason, body=data.decode(errors="replace"))
    return data


def get(api: client.ApiClient, path: str, *, query: dict[str, str] | None = None) -> JSON:
    """GET, decoded with orjson."""
    parsed: JSON = orjson.loads(call(api, "GET", path, query=query))
    return parsed


def create(api: client.ApiClient, path: str, body: JSON) -> bool:
    """POST; False when the object exists already (409), so callers stay idempotent."""
    try:
        call(api, "POST", path, body)
    except client.ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True


def delete(api: client.ApiClient, path: str, *, query: dict[str, str] | None = None) -> bool:
    """DELETE; False when the object was gone already (404)."""
    try:
        call(api, "DELETE", path, query=query)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def create_namespace(api: client.ApiClient, name: str, timeout: float = 120.0) -> None:
    """Create a namespace (idempotent) and wait for its default ServiceAccount."""
    namespace = client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    try:
        client.CoreV1Api(api).create_namespace(namespace, _request_timeout=TIMEOUT_S)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    wait_default_service_account(api, name, timeout)


def wait_default_service_account(api: client.ApiClient, namespace: str, timeout: float = 120.0) -> None:
    """Wait until the controller-manager has made the namespace's default ServiceAccount: a pod created
    before it is refused (403), and a busy control plane (hundreds of nodes just added) can take seconds."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while True:
        try:
            core.read_namespaced_service_account("default", namespace, _request_timeout=TIMEOUT_S)
            return
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"no default ServiceAccount in {namespace} after {timeout:.0f} s")
        time.sleep(0.2)
