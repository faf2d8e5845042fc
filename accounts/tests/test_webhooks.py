"""Project webhooks: managers set them, job events reach a real HTTP receiver signed with the
secret, a failing receiver is retried through Celery and every attempt is logged."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import socket
import ssl
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.test import override_settings

from accounts import webhooks
from accounts.choices import TaskName, TokenScope
from accounts.models import ProjectWebhook, WebhookDelivery
from accounts.tasks import deliver_webhook
from accounts.tests.conftest import Receiver
from tests.fixtures.personas import World, api_client
from workloads.services import jobs as job_services
from workloads.tasks import notify_job
from workloads.tests.conftest import IMAGE, capture_sends

pytestmark = pytest.mark.django_db
ADMIN = (TokenScope.READ, TokenScope.ADMIN)


def _set(world: World, url: str) -> Any:
    client = api_client(world.owner, scopes=ADMIN)
    return client.put(f"/api/v1/projects/{world.alpha.slug}/webhook/", {"url": url}, format="json")


def test_only_managers_set_it_and_the_secret_is_shown_once(world: World, receiver: Receiver) -> None:
    first = _set(world, receiver.url)
    assert first.status_code == 201
    assert len(first.json()["secret"]) == 64
    again = _set(world, receiver.url + "2")
    assert again.status_code == 200
    assert "secret" not in again.json()
    assert again.json()["url"] == receiver.url + "2"
    for user, code in ((world.member, 403), (world.viewer, 403), (world.outsider, 404)):
        response = api_client(user, scopes=ADMIN).put(
            f"/api/v1/projects/{world.alpha.slug}/webhook/", {"url": receiver.url}, format="json"
        )
        assert response.status_code == code, (user, response.content)
    assert api_client(world.member).get(f"/api/v1/projects/{world.alpha.slug}/webhook/").status_code == 403


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://127.0.0.1/hook", "resolves to a private address (127.0.0.1)"),
        ("https://169.254.169.254/latest", "resolves to a private address (169.254.169.254)"),
        ("http://example.org/hook", "Use https"),
        ("ftp://example.org/x", "http(s) URL"),
    ],
)
def test_urls_inside_the_network_are_refused(world: World, url: str, message: str) -> None:
    response = _set(world, url)
    assert response.status_code == 400
    assert message in json.dumps(response.json())
    assert not WebhookDelivery.objects.exists()


def test_a_job_event_arrives_signed(
    world: World, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    from workloads.tests.conftest import allow_images

    allow_images(world.alpha)
    secret = _set(world, receiver.url).json()["secret"]
    job = job_services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE})
    sent = capture_sends(monkeypatch, TaskName.DELIVER_WEBHOOK)
    with django_capture_on_commit_callbacks(execute=True):
        notify_job(job.pk, "succeeded")
    assert len(sent) == 1
    deliver_webhook(sent[0])
    ((headers, body),) = receiver.got
    # Checked the way a receiver would, not with the portal's own function.
    signed = headers["X-GPU-Portal-Timestamp"].encode() + b"." + body
    expected = "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    assert headers["X-GPU-Portal-Signature"] == expected
    assert headers["X-GPU-Portal-Event"] == "job.succeeded"  # the event, not the job's state now
    event = json.loads(body)
    assert event["job"]["uid"] == str(job.uid)
    assert (event["event"], event["what"]) == ("job.succeeded", "succeeded")
    assert WebhookDelivery.objects.get(pk=sent[0]).delivered_at is not None


@pytest.mark.parametrize("receiver", [[500, 503]], indirect=True)
def test_a_failing_receiver_is_retried_and_every_attempt_logged(world: World, receiver: Receiver) -> None:
    _set(world, receiver.url)
    from accounts.webhooks import delivery_create

    delivery = delivery_create(project=world.alpha, event="job.failed", payload={"job": {}})
    assert delivery is not None
    deliver_webhook.apply(args=(delivery.pk,))  # eager: Celery runs its retries at once
    delivery.refresh_from_db()
    assert len(receiver.got) == 3
    assert (delivery.attempts, delivery.last_status) == (3, 200)
    assert delivery.delivered_at is not None


def _resolver(monkeypatch: pytest.MonkeyPatch, name: str, answers: list[str]) -> list[str]:
    """`name` resolves to each of `answers` in turn (the last one from then on); others as usual.
    Returns the answers given, in order."""
    real, given = socket.getaddrinfo, list[str]()

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host != name:
            return real(host, port, *args, **kwargs)
        given.append(answers[min(len(given), len(answers) - 1)])
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (given[-1], int(port or 0)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return given


def _deliver_once(world: World, url: str) -> WebhookDelivery:
    ProjectWebhook.objects.create(project=world.alpha, url=url, secret="s" * 64)
    delivery = webhooks.delivery_create(project=world.alpha, event="job.state", payload={"job": "x"})
    assert delivery is not None
    with contextlib.suppress(webhooks.WebhookFailed):
        webhooks.deliver(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    return delivery


def test_a_name_that_answers_elsewhere_the_second_time_is_still_sent_where_it_was_checked(
    world: World, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = receiver.server_address[1]
    elsewhere = Receiver([], address=("127.0.0.2", port))  # what the name answers the second time
    threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
    try:
        given = _resolver(monkeypatch, "rebind.example", ["127.0.0.1", "127.0.0.2"])
        delivery = _deliver_once(world, f"http://rebind.example:{port}/hook")
    finally:
        elsewhere.shutdown()
    assert delivery.delivered_at is not None, delivery.last_error
    assert given == ["127.0.0.1"]  # looked up once
    ((headers, _),) = receiver.got
    assert headers["Host"] == f"rebind.example:{port}"
    assert elsewhere.got == []


def _tls_pair(name: str, folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for `name` only (no IP address in it) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_a_delivery_by_address_keeps_the_name_for_sni_and_the_certificate(
    world: World, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert, key = _tls_pair("hook.example", tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    server = Receiver([])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _resolver(monkeypatch, "hook.example", ["127.0.0.1"])
    try:
        with override_settings(GPUPORTAL_WEBHOOK_ALLOW_PRIVATE=True):
            delivery = _deliver_once(world, f"https://hook.example:{server.server_address[1]}/hook")
    finally:
        server.shutdown()
    assert delivery.delivered_at is not None, delivery.last_error  # the certificate names the host
    assert len(server.got) == 1


@pytest.mark.parametrize(
    "address",
    [
        "::ffff:10.0.0.1",  # IPv4-mapped
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
        "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo, client 10.0.0.1
    ],
)
def test_private_ipv4_written_inside_ipv6_is_refused(address: str) -> None:
    assert webhooks.is_inside(address)


def test_public_addresses_are_not_inside() -> None:
    assert not webhooks.is_inside("93.184.215.14")
    assert not webhooks.is_inside("64:ff9b::5db8:d70e")  # NAT64 of a public address
    assert not webhooks.is_inside("2606:4700::6810:84e5")
