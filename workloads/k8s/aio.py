"""Long reads without a thread: a followed pod log streamed on the event loop (httpx).

The official client is blocking, so a followed log read through it holds a worker thread for as
long as the pod runs; a few open job pages would exhaust the ASGI server's thread pool. This reads
the same endpoint with the same credentials (server, CA, client certificate or bearer token from
the client's Configuration) as async chunks, and closing the iterator closes the connection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from workloads.k8s.errors import K8sTransientError, error_for


def _auth(configuration: Any) -> tuple[dict[str, str], tuple[str, str] | None]:
    hook = getattr(configuration, "refresh_api_key_hook", None)
    if hook is not None:
        hook(configuration)  # in a pod the projected token is re-read as it rotates
    token = (configuration.api_key or {}).get("authorization", "")
    prefix = (configuration.api_key_prefix or {}).get("authorization", "")
    headers = {"Authorization": f"{prefix} {token}".strip()} if token else {}
    cert = (configuration.cert_file, configuration.key_file) if configuration.cert_file else None
    return headers, cert


def _verify(configuration: Any) -> str | bool:
    if not configuration.verify_ssl:
        return False
    return str(configuration.ssl_ca_cert) if configuration.ssl_ca_cert else True


async def stream_chunks(
    configuration: Any, path: str, query: dict[str, str], *, connect_timeout: float = 10
) -> AsyncIterator[bytes]:
    """The body of GET `path` as it arrives, chunk by chunk (blank lines and all)."""
    headers, cert = _auth(configuration)
    timeout = httpx.Timeout(connect_timeout, read=None)
    try:
        async with (
            httpx.AsyncClient(base_url=configuration.host, verify=_verify(configuration), cert=cert) as http,
            http.stream("GET", path, params=query, headers=headers, timeout=timeout) as response,
        ):
            if response.status_code >= 300:
                body = await response.aread()
                raise error_for(response.status_code, body.decode(errors="replace"))
            async for chunk in response.aiter_raw():
                yield chunk
    except httpx.HTTPError as exc:
        raise K8sTransientError(0, f"stream broken: {exc}") from exc
