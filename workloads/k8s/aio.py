"""Long reads without a thread: a followed pod log streamed on the event loop (httpx).

The official client is blocking, so a followed log read through it holds a worker thread for as
long as the pod runs; a few open job pages would exhaust the ASGI server's thread pool. This reads
the same endpoint with the same credentials (server, CA, client certificate or bearer token from
the client's Configuration) as async chunks, and closing the iterator closes the connection.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx

from workloads.k8s.errors import K8sTransientError, error_for


def _headers(configuration: Any) -> dict[str, str]:
    """The credentials header the official client would send: its auth settings name it and read the
    token (in a pod they re-read the projected token as it rotates, under the key `BearerToken`)."""
    settings = configuration.auth_settings().values()
    return {s["key"]: s["value"] for s in settings if s["in"] == "header" and s["value"]}


def _tls(configuration: Any) -> ssl.SSLContext | bool:
    """The server's CA and the client certificate, as the official client uses them."""
    if not configuration.verify_ssl:
        return False
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file or None)
    return context


async def stream_chunks(
    configuration: Any, path: str, query: dict[str, str], *, connect_timeout: float = 10
) -> AsyncIterator[bytes]:
    """The body of GET `path` as it arrives, chunk by chunk (blank lines and all)."""
    timeout = httpx.Timeout(connect_timeout, read=None)
    try:
        async with (
            httpx.AsyncClient(
                base_url=configuration.host, verify=_tls(configuration), trust_env=False
            ) as http,
            http.stream(
                "GET", path, params=query, headers=_headers(configuration), timeout=timeout
            ) as response,
        ):
            if response.status_code >= 300:
                body = await response.aread()
                raise error_for(response.status_code, body.decode(errors="replace"))
            async for chunk in response.aiter_raw():
                yield chunk
    except httpx.HTTPError as exc:
        raise K8sTransientError(0, f"stream broken: {exc}") from exc
