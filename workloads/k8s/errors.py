"""Kubernetes API errors, split into transient (retry) and permanent (record and stop)."""

from __future__ import annotations


class K8sError(Exception):
    """An API answer the caller must handle; `status` is the HTTP status (0: no answer)."""

    def __init__(self, status: int, message: str = "") -> None:
        super().__init__(f"Kubernetes API {status}: {message[:300]}")
        self.status = status
        self.message = message


class K8sTransientError(K8sError):
    """Worth retrying: no connection, timeouts, 429, 5xx, or a conflicting concurrent write."""


class K8sGoneError(K8sError):
    """410 Gone: the resourceVersion is too old; relist."""


def error_for(status: int, message: str) -> K8sError:
    if status == 410:
        return K8sGoneError(status, message)
    if status == 0 or status == 429 or status >= 500 or status == 409:
        return K8sTransientError(status, message)
    return K8sError(status, message)
