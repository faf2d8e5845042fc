"""A user's email choices: which kinds of job event email them (all on by default), through the API
(`/api/v1/me/notifications/`, strict about its shape) and the Notifications page, audited."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.choices import NotifyEvent, TokenScope
from accounts.models import AuditLog, User
from tests.fixtures.personas import World, api_client, session_client

pytestmark = pytest.mark.django_db
URL = "/api/v1/me/notifications/"
ALL_ON = dict.fromkeys(NotifyEvent.values, True)
ADMIN = (TokenScope.READ, TokenScope.ADMIN)


def _put(user: User, body: Any) -> Any:
    return api_client(user, scopes=ADMIN).put(URL, body, format="json")


def test_everything_emails_by_default(world: World) -> None:
    response = api_client(world.member).get(URL)
    assert response.status_code == 200
    assert response.json() == {"email": True, "events": ALL_ON}


def test_a_choice_is_saved_and_audited(world: World) -> None:
    events = {**ALL_ON, "idle": False, "started": False}
    response = _put(world.member, {"email": True, "events": events})
    assert response.status_code == 200, response.content
    assert response.json() == {"email": True, "events": events}
    world.member.refresh_from_db()
    assert world.member.email_muted == ["started", "idle"]
    assert world.member.emails_about("finished")
    assert not world.member.emails_about("idle")
    row = AuditLog.objects.get(action="user.notifications", actor=world.member)
    assert row.before == {"notify_by_email": True, "email_muted": []}
    assert row.after == {"notify_by_email": True, "email_muted": ["started", "idle"]}
    assert api_client(world.owner).get(URL).json()["events"] == ALL_ON  # another user's are untouched


def test_the_master_switch_turns_every_email_off(world: World) -> None:
    assert _put(world.member, {"email": False, "events": ALL_ON}).status_code == 200
    world.member.refresh_from_db()
    assert not any(world.member.emails_about(event) for event in NotifyEvent.values)


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        (
            {"email": True, "events": ALL_ON, "sms": True},
            {"sms": ["Unknown field; a choice has email and events."]},
        ),
        ({"events": ALL_ON}, {"email": ["Required."]}),
        ({"email": "yes", "events": ALL_ON}, {"email": ["Must be true or false."]}),
        ({"email": True, "events": [True]}, {"events": ["Must be an object."]}),
        (
            {"email": True, "events": {**ALL_ON, "cancelled": False}},
            {"events": {"cancelled": ["Unknown field; events are " + ", ".join(NotifyEvent.values) + "."]}},
        ),
        ({"email": True, "events": {**ALL_ON, "idle": 0}}, {"events": {"idle": ["Must be true or false."]}}),
        (
            {"email": True, "events": {k: v for k, v in ALL_ON.items() if k != "failed"}},
            {"events": {"failed": ["Required."]}},
        ),
        ([True], {"non_field_errors": ["Send a JSON object: a choice has email and events."]}),
    ],
)
def test_a_wrong_shape_is_a_400_naming_each_key_and_changes_nothing(
    world: World, body: Any, errors: dict[str, Any]
) -> None:
    response = _put(world.member, body)
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    for key, message in errors.items():
        assert fields[key] == message, fields
    world.member.refresh_from_db()
    assert (world.member.notify_by_email, world.member.email_muted) == (True, [])
    assert not AuditLog.objects.filter(action="user.notifications").exists()


def test_a_read_token_reads_but_does_not_change(world: World) -> None:
    client = api_client(world.member, scopes=(TokenScope.READ,))
    assert client.get(URL).status_code == 200
    assert client.put(URL, {"email": False, "events": ALL_ON}, format="json").status_code == 403


def test_the_page_shows_the_choices_and_saves_them(world: World) -> None:
    client = session_client(world.member)
    page = client.get("/me/notifications/").content.decode()
    for value, label in NotifyEvent.choices:
        assert f'name="{value}"' in page
        assert str(label).replace("'", "&#x27;") in page
    assert page.count("checked") == len(NotifyEvent.values) + 1  # all on, and the master switch
    posted = {"email": "on", **{event: "on" for event in NotifyEvent.values if event != "preemption"}}
    response = client.post("/me/notifications/", posted)
    assert (response.status_code, response["Location"]) == (302, "/me/notifications/")
    world.member.refresh_from_db()
    assert (world.member.notify_by_email, world.member.email_muted) == (True, ["preemption"])
    again = client.get("/me/notifications/").content.decode()
    assert again.count("checked") == len(NotifyEvent.values)
    assert AuditLog.objects.filter(action="user.notifications", actor=world.member).count() == 1


def test_the_settings_page_links_to_the_choices(world: World) -> None:
    page = session_client(world.member).get("/me/settings/").content.decode()
    assert 'href="/me/notifications/"' in page
