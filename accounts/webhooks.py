"""Project webhooks: a manager sets the URL, the portal POSTs each job event to it, signed.

The body is JSON; `X-GPU-Portal-Signature: sha256=<hex>` is HMAC-SHA256 of `<timestamp>.<body>`
under the hook's secret, with the timestamp in `X-GPU-Portal-Timestamp` (a receiver refuses old
ones, so a captured delivery cannot be replayed later). A URL that resolves to a private, loopback
or link-local address is refused when set and again when sent: the portal's network position must
not let a tenant reach the cluster's internal services (SSRF).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from celery import current_app
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from accounts.audit import audit_record
from accounts.choices import TaskName
from accounts.models import Project, ProjectWebhook, User, WebhookDelivery
from accounts.services import require_manager as require_manager

TIMEOUT_S = 5.0
PING = "ping"
# One quick retry: a manager's request must not hang on a broker that is down.
ONE_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
log = logging.getLogger(__name__)


class WebhookFailed(Exception):
    """A delivery that did not get a 2xx; the task retries it with back-off."""


def _allow_private() -> bool:
    return bool(settings.GPUPORTAL_WEBHOOK_ALLOW_PRIVATE)


def check_url(url: str) -> None:
    """Refuse what must never be called: other schemes, and hosts that resolve inside."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValidationError({"url": ["Give an http(s) URL with a host name."]})
    if parts.scheme == "http" and not _allow_private():
        raise ValidationError({"url": ["Use https: the body carries job names and states."]})
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or 443)}
    except socket.gaierror:
        raise ValidationError({"url": [f"{parts.hostname} does not resolve."]}) from None
    inside = [a for a in map(str, addresses) if not ipaddress.ip_address(a.split("%")[0]).is_global]
    if inside and not _allow_private():
        raise ValidationError({"url": [f"{parts.hostname} resolves to a private address ({inside[0]})."]})


def webhook_set(
    *, actor: User, project: Project, url: str, request: HttpRequest | None = None
) -> tuple[ProjectWebhook, str | None]:
    """Set (or change) the hook's URL; returns it and its secret when a new one was made."""
    require_manager(actor=actor, project=project, what="set its webhook")
    check_url(url)
    with transaction.atomic():
        hook = ProjectWebhook.objects.filter(project=project).first()
        fresh = None
        if hook is None:
            fresh = secrets.token_hex(32)
            hook = ProjectWebhook(project=project, secret=fresh)
        hook.url, hook.enabled, hook.updated_at = url, True, timezone.now()
        hook.full_clean()
        hook.save()
        audit_record(
            actor=actor, action="webhook.set", obj=hook, project=project, after={"url": url}, request=request
        )
    return hook, fresh


def webhook_remove(*, actor: User, project: Project, request: HttpRequest | None = None) -> bool:
    require_manager(actor=actor, project=project, what="set its webhook")
    deleted, _ = ProjectWebhook.objects.filter(project=project).delete()
    if deleted:
        audit_record(actor=actor, action="webhook.remove", project=project, request=request)
    return bool(deleted)


def delivery_create(*, project: Project, event: str, payload: dict[str, Any]) -> WebhookDelivery | None:
    """Record one event for the project's hook (None when it has none or it is off)."""
    hook = ProjectWebhook.objects.filter(project=project, enabled=True).first()
    if hook is None:
        return None
    return WebhookDelivery.objects.create(webhook=hook, event=event, payload=payload)


def webhook_ping(*, actor: User, project: Project, request: HttpRequest | None = None) -> WebhookDelivery:
    """A test event for the project's hook, delivered (and retried) like any other, after commit."""
    require_manager(actor=actor, project=project, what="test its webhook")
    hook = ProjectWebhook.objects.filter(project=project).first()
    if hook is None:
        raise ValidationError("This project has no webhook.")
    with transaction.atomic():
        payload = {"project": project.slug, "what": f"a test event sent by {actor}"}
        delivery = WebhookDelivery.objects.create(webhook=hook, event=PING, payload=payload)
        audit_record(actor=actor, action="webhook.ping", obj=hook, project=project, request=request)
        transaction.on_commit(lambda: send_delivery(delivery.pk))
    return delivery


def send_delivery(delivery_id: int) -> bool:
    """Publish the delivery task by name; False (logged) when the broker is down: the row stays
    undelivered in the log, and the manager can send another test."""
    try:
        current_app.send_task(
            TaskName.DELIVER_WEBHOOK.value, args=[delivery_id], retry=True, retry_policy=ONE_RETRY
        )
    except Exception:
        log.warning("could not publish webhook delivery %s (broker down?)", delivery_id, exc_info=True)
        return False
    return True


def signature(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def deliver(*, delivery_id: int) -> bool:
    """POST one delivery; True when done (now or before). Raises WebhookFailed to be retried."""
    delivery = WebhookDelivery.objects.select_related("webhook").filter(pk=delivery_id).first()
    if delivery is None or delivery.delivered_at is not None:
        return True
    hook = delivery.webhook
    body = json.dumps({"event": delivery.event, "delivery": delivery.pk, **delivery.payload}).encode()
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-GPU-Portal-Event": delivery.event,
        "X-GPU-Portal-Delivery": str(delivery.pk),
        "X-GPU-Portal-Timestamp": stamp,
        "X-GPU-Portal-Signature": signature(hook.secret, stamp, body),
    }
    status, error = None, ""
    try:
        check_url(hook.url)  # again: the name may resolve elsewhere now
        status = httpx.post(hook.url, content=body, headers=headers, timeout=TIMEOUT_S).status_code
    except (httpx.HTTPError, ValidationError) as exc:
        error = str(exc)[:300]
    ok = status is not None and 200 <= status < 300
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        attempts=delivery.attempts + 1,
        last_status=status,
        last_error=error if not ok else "",
        delivered_at=timezone.now() if ok else None,
    )
    if not ok:
        raise WebhookFailed(error or f"HTTP {status}")
    return True
