"""The webhook form on a manager's project page: set the URL (secret shown once), the same checks as the
API, a test event that reaches a real receiver signed, the delivery log, removal; members and viewers
see none of it and may not post, outsiders get a 404."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from accounts import webhooks
from accounts.models import AuditLog, ProjectWebhook, WebhookDelivery
from accounts.tasks import deliver_webhook
from accounts.tests.conftest import Receiver
from tests.fixtures.personas import World, session_client

pytestmark = pytest.mark.django_db
PAGE = "/me/projects/alpha/"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Delivery ids the page hands to the broker, kept instead of sent."""
    ids: list[int] = []

    def keep(pk: int) -> bool:
        ids.append(pk)
        return True

    monkeypatch.setattr(webhooks, "send_delivery", keep)
    return ids


def test_only_managers_see_the_form(world: World) -> None:
    assert 'id="webhook-h"' in session_client(world.owner).get(PAGE).content.decode()
    assert 'id="webhook-h"' in session_client(world.admin).get(PAGE).content.decode()  # an operator
    for user in (world.member, world.viewer):
        page = session_client(user).get(PAGE)
        assert page.status_code == 200
        assert 'id="webhook-h"' not in page.content.decode()
        assert "webhook/" not in page.content.decode()
    assert session_client(world.outsider).get(PAGE).status_code == 404


def test_members_viewers_and_outsiders_may_not_post(world: World, receiver: Receiver) -> None:
    ProjectWebhook.objects.create(project=world.alpha, url=receiver.url, secret="s" * 64)
    for user, code in ((world.member, 403), (world.viewer, 403), (world.outsider, 404)):
        client = session_client(user)
        for path, data in (
            ("webhook/", {"url": "https://evil.example/x"}),
            ("webhook/test/", {}),
            ("webhook/remove/", {}),
        ):
            assert client.post(PAGE + path, data).status_code == code, (user, path)
    hook = ProjectWebhook.objects.get()
    assert (hook.url, WebhookDelivery.objects.count()) == (receiver.url, 0)


def test_setting_it_shows_the_secret_once_and_a_test_event_arrives_signed(
    world: World, receiver: Receiver, sent: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    client = session_client(world.owner)
    created = client.post(PAGE + "webhook/", {"url": receiver.url})
    assert created.status_code == 200
    hook = ProjectWebhook.objects.get(project=world.alpha)
    page = created.content.decode()
    assert f'id="webhook-secret">{hook.secret}<' in page
    assert hook.secret not in client.get(PAGE).content.decode()  # shown once
    changed = client.post(PAGE + "webhook/", {"url": receiver.url + "2"})
    assert changed.status_code == 302
    assert hook.secret not in client.get(changed["Location"]).content.decode()
    hook.refresh_from_db()
    assert hook.url == receiver.url + "2"

    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(PAGE + "webhook/test/").status_code == 302
    (delivery_id,) = sent
    deliver_webhook(delivery_id)
    ((headers, body),) = receiver.got
    signed = headers["X-GPU-Portal-Timestamp"].encode() + b"." + body
    expected = "sha256=" + hmac.new(hook.secret.encode(), signed, hashlib.sha256).hexdigest()
    assert headers["X-GPU-Portal-Signature"] == expected
    assert (headers["X-GPU-Portal-Event"], json.loads(body)["project"]) == ("ping", "alpha")
    log = client.get(PAGE).content.decode()
    assert "<code>ping</code>" in log
    assert "delivered (200)" in log
    actions = set(AuditLog.objects.filter(project=world.alpha).values_list("action", flat=True))
    assert {"webhook.set", "webhook.ping"} <= actions


@pytest.mark.parametrize("receiver", [[500, 500, 500, 500, 500, 500, 500, 500, 500]], indirect=True)
def test_a_failing_receiver_is_retried_and_its_attempts_show_in_the_log(
    world: World, receiver: Receiver, sent: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    client = session_client(world.owner)
    client.post(PAGE + "webhook/", {"url": receiver.url})
    with django_capture_on_commit_callbacks(execute=True):
        client.post(PAGE + "webhook/test/")
    deliver_webhook.apply(args=tuple(sent))  # eager: Celery runs its retries at once, then gives up
    delivery = WebhookDelivery.objects.get()
    assert (delivery.attempts, delivery.last_status, delivery.delivered_at) == (9, 500, None)
    assert len(receiver.got) == 9
    page = client.get(PAGE).content.decode()
    assert "failing: 500" in page
    assert "<td>9</td>" in page
    assert "0 delivered, 1 failing so far." in page


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://127.0.0.1/hook", "resolves to a private address (127.0.0.1)"),
        ("https://169.254.169.254/latest", "resolves to a private address (169.254.169.254)"),
        ("http://example.org/hook", "Use https"),
        ("not a url", "Enter a valid URL."),
    ],
)
def test_the_form_refuses_what_the_api_refuses(world: World, url: str, message: str) -> None:
    response = session_client(world.owner).post(PAGE + "webhook/", {"url": url})
    assert response.status_code == 400
    page = response.content.decode()
    assert message in page
    assert 'aria-invalid="true"' in page
    assert not ProjectWebhook.objects.exists()


def test_a_test_event_without_a_webhook_says_so(world: World, sent: list[int]) -> None:
    client = session_client(world.owner)
    response = client.post(PAGE + "webhook/test/", follow=True)
    assert "This project has no webhook." in response.content.decode()
    assert sent == []


def test_removing_it_takes_its_log_along(world: World, sent: list[int]) -> None:
    hook = ProjectWebhook.objects.create(
        project=world.alpha, url="https://hooks.example.org/x", secret="s" * 64
    )
    WebhookDelivery.objects.create(webhook=hook, event="job.started", payload={})
    client = session_client(world.owner)
    assert client.post(PAGE + "webhook/remove/").status_code == 302
    assert not ProjectWebhook.objects.exists()
    assert not WebhookDelivery.objects.exists()
    assert 'id="webhook-deliveries"' not in client.get(PAGE).content.decode()
    assert AuditLog.objects.filter(action="webhook.remove", project=world.alpha).exists()


def test_the_api_sends_a_test_event_too(
    world: World, sent: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    from accounts.choices import TokenScope
    from tests.fixtures.personas import api_client

    url = "/api/v1/projects/alpha/webhook/ping/"
    admin = (TokenScope.READ, TokenScope.ADMIN)
    assert api_client(world.owner, scopes=admin).post(url).status_code == 404  # no webhook yet
    ProjectWebhook.objects.create(project=world.alpha, url="https://hooks.example.org/x", secret="s" * 64)
    assert api_client(world.member, scopes=admin).post(url).status_code == 403
    assert api_client(world.owner).post(url).status_code == 403  # a token without the admin scope
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client(world.owner, scopes=admin).post(url)
    assert response.status_code == 202
    assert (response.json()["event"], sent) == ("ping", [response.json()["id"]])
