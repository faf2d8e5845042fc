"""Project webhooks: managers set them, job events reach a real HTTP receiver signed with the
secret, a failing receiver is retried through Celery and every attempt is logged."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import pytest

from accounts.choices import TaskName, TokenScope
from accounts.models import WebhookDelivery
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
