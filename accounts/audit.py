"""The audit trail: every service that changes state records one row through `audit_record`."""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Any

from django.conf import settings
from django.db import models
from django.forms.models import model_to_dict
from django.http import HttpRequest

from accounts.models import AuditLog, Project, User


def snapshot(obj: models.Model | None, *, exclude: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """A JSON-safe picture of a row for before/after; secrets are excluded by the caller."""
    if obj is None:
        return None
    data = model_to_dict(obj, exclude=list(exclude))
    return {
        key: value if isinstance(value, (int, float, bool, type(None))) else str(value)
        for key, value in data.items()
    }


def client_ip(request: HttpRequest | None) -> str | None:
    """The client's address as the rate limits count it: X-Forwarded-For's entry TRUSTED_PROXIES from
    the right (the one our own nearest proxy wrote; what the client wrote itself is further left),
    or the socket's address without proxies or without such an entry."""
    if request is None:
        return None
    ip = request.META.get("REMOTE_ADDR")
    proxies = int(settings.TRUSTED_PROXIES)
    hops = [h.strip() for h in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",") if h.strip()]
    if proxies > 0 and hops:
        forwarded = hops[-min(proxies, len(hops))]
        with contextlib.suppress(ValueError):
            return str(ipaddress.ip_address(forwarded))
    return str(ip) if ip else None


def audit_record(
    *,
    actor: User | None,
    action: str,
    obj: models.Model | None = None,
    project: Project | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    request: HttpRequest | None = None,
) -> AuditLog:
    return AuditLog.objects.create(
        actor=actor,
        actor_repr=str(actor) if actor else "system",
        action=action,
        object_type=obj._meta.label if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        object_repr=str(obj)[:200] if obj is not None else "",
        project=project,
        before=before,
        after=after,
        ip=client_ip(request),
    )
