"""Portal pages for accounts: dashboard, project, members, tokens, settings; foreign projects are 404."""

from __future__ import annotations

import pytest

from accounts.models import ApiToken, Membership
from tests.fixtures.personas import World, session_client

pytestmark = pytest.mark.django_db


def test_dashboard_lists_only_my_projects(world: World) -> None:
    page = session_client(world.member).get("/dashboard/").content.decode()
    assert "Alpha" in page
    assert "Beta" not in page


def test_anonymous_is_sent_to_sign_in(db: None) -> None:
    from django.test import Client

    response = Client().get("/dashboard/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_foreign_project_page_is_404(world: World) -> None:
    assert session_client(world.member).get("/me/projects/beta/").status_code == 404
    assert (
        session_client(world.member).post("/me/projects/beta/members/", {"email": "x@y.z"}).status_code == 404
    )


def test_manager_adds_and_changes_members_on_the_page(world: World) -> None:
    client = session_client(world.owner)
    client.post("/me/projects/alpha/members/", {"email": "oscar@example.com", "role": "viewer"})
    membership = Membership.objects.get(project=world.alpha, user=world.outsider)
    assert membership.role == "viewer"
    client.post(f"/me/projects/alpha/members/{membership.pk}/", {"role": "member"})
    membership.refresh_from_db()
    assert membership.role == "member"
    client.post(f"/me/projects/alpha/members/{membership.pk}/", {"remove": "1"})
    assert not Membership.objects.filter(pk=membership.pk).exists()


def test_member_sees_no_management_controls_and_cannot_post(world: World) -> None:
    client = session_client(world.member)
    page = client.get("/me/projects/alpha/").content.decode()
    assert "Add member" not in page
    response = client.post("/me/projects/alpha/members/", {"email": "oscar@example.com"}, follow=True)
    assert "managers" in response.content.decode()
    assert not Membership.objects.filter(project=world.alpha, user=world.outsider).exists()


def test_bad_email_is_explained_in_place(world: World) -> None:
    response = session_client(world.owner).post(
        "/me/projects/alpha/members/", {"email": "ghost@example.com"}, follow=True
    )
    assert "No active user has this email address." in response.content.decode()


def test_token_page_shows_the_secret_once(world: World) -> None:
    client = session_client(world.member)
    created = client.post("/me/tokens/", {"name": "laptop", "scopes": ["read", "submit"], "days": 30})
    token = ApiToken.objects.get(user=world.member)
    page = created.content.decode()
    assert 'id="new-token"' in page
    assert "gpt_" in page
    again = client.get("/me/tokens/").content.decode()
    assert 'id="new-token"' not in again
    assert token.prefix in again


def test_token_form_errors_are_400_and_write_nothing(world: World) -> None:
    response = session_client(world.member).post("/me/tokens/", {"name": "", "scopes": ["root"], "days": 900})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_notifications_setting(world: World) -> None:
    client = session_client(world.member)
    client.post("/me/notifications/", {})
    world.member.refresh_from_db()
    assert world.member.notify_by_email is False
