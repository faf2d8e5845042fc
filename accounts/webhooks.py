"""Project webhooks: a manager sets the URL, the portal POSTs each job event to it, signed.

The body is JSON; `X-GPU-Portal-Signature: sha256=<hex>` is HMAC-SHA256 of `<timestamp>.<body>`
under the hook's secret, with the timestamp in `X-GPU-Portal-Timestamp` (a receiver refuses old
ones, so a captured delivery cannot be replayed later). A URL that resolves to a private, loopback
or link-local address (also written inside an IPv6 one: mapped, 6to4, Teredo, NAT64) is refused when
set and again when sent: the portal's network position must not let a tenant reach the cluster's
internal services (SSRF). A delivery looks the name up once and connects to the address it checked
(the name still in Host, SNI and the certificate check), so a name that answers differently the
second time (DNS rebinding) cannot send it inside.
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
from urllib.parse import SplitResult, urlsplit

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


NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, Teredo's client, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_inside(address: str) -> bool:
    """Not a public address, or a public form of one that is not (a translated private IPv4)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    embedded = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    return not ip.is_global or (embedded is not None and not embedded.is_global)


def checked_address(url: str) -> tuple[SplitResult, str]:
    """The URL's parts and the one address to connect to: every address the name has is checked;
    refuses (ValidationError) other schemes and names that resolve inside."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValidationError({"url": ["Give an http(s) URL with a host name."]})
    if parts.scheme == "http" and not _allow_private():
        raise ValidationError({"url": ["Use https: the body carries job names and states."]})
    default_port = 443 if parts.scheme == "https" else 80
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or default_port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise ValidationError({"url": [f"{parts.hostname} does not resolve."]}) from None
    addresses = [str(info[4][0]) for info in infos]
    inside = [a for a in addresses if is_inside(a)]
    if inside and not _allow_private():
        raise ValidationError({"url": [f"{parts.hostname} resolves to a private address ({inside[0]})."]})
    return parts, addresses[0]


def check_url(url: str) -> None:
    """Refuse what must never be called: other schemes, and hosts that resolve inside."""
    checked_address(url)


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST to the address checked now, never to a second lookup of the name."""
    parts, address = checked_address(url)
    host = f"[{address}]" if ":" in address else address
    netloc = f"{host}:{parts.port}" if parts.port else host
    target = parts._replace(netloc=netloc).geturl()
    name = parts.hostname or ""
    headers = {**headers, "Host": parts.netloc.rpartition("@")[2]}
    # SNI and the certificate check use the name, as a browser would (httpcore's sni_hostname).
    extensions = {"sni_hostname": name} if parts.scheme == "https" else {}
    with httpx.Client(timeout=TIMEOUT_S) as client:
        request = client.build_request("POST", target, content=body, headers=headers, extensions=extensions)
        return client.send(request).status_code


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
        status = _post(hook.url, body, headers)  # checked again: the name may resolve elsewhere now
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
