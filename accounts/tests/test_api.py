"""The accounts API: shapes, roles, scopes and bad input answered with field messages."""

from __future__ import annotations

import pytest

from accounts.choices import Role, TokenScope
from accounts.models import ApiToken, AuditLog, Membership
from tests.fixtures.personas import World, api_client, api_session_client

pytestmark = pytest.mark.django_db


def test_me_with_a_token(world: World) -> None:
    body = api_client(world.member).get("/api/v1/me/").json()
    assert body["email"] == "bob@example.com"
    assert body["is_staff"] is False


def test_projects_list_only_mine_with_quota_and_role(world: World) -> None:
    body = api_client(world.member).get("/api/v1/projects/").json()
    assert body["count"] == 1
    (project,) = body["results"]
    assert project["slug"] == "alpha"
    assert project["my_role"] == "member"
    assert project["quota"]["gpus"] == 8
    assert project["namespace"] == "gp-alpha"


def test_manager_adds_member_by_email(world: World) -> None:
    client = api_client(world.owner, scopes=(TokenScope.ADMIN,))
    response = client.post(
        "/api/v1/projects/alpha/members/", {"email": "oscar@example.com", "role": "viewer"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert Membership.objects.get(project=world.alpha, user=world.outsider).role == Role.VIEWER


def test_member_cannot_add_members(world: World) -> None:
    client = api_session_client(world.member)
    response = client.post("/api/v1/projects/alpha/members/", {"email": "oscar@example.com"}, format="json")
    assert response.status_code == 403
    assert "managers" in response.json()["error"]["message"]
    assert not Membership.objects.filter(project=world.alpha, user=world.outsider).exists()


def test_bad_member_input_gets_field_messages(world: World) -> None:
    client = api_session_client(world.owner)
    cases = [
        ({"email": "not-an-email"}, "email"),
        ({"email": "nobody@example.com"}, "email"),
        ({"email": "oscar@example.com", "role": "owner"}, "role"),
        ({}, "email"),
    ]
    for payload, field in cases:
        response = client.post("/api/v1/projects/alpha/members/", payload, format="json")
        assert response.status_code == 400, (payload, response.content)
        error = response.json()["error"]
        assert field in error["fields"], error
        assert error["message"]
    assert Membership.objects.filter(project=world.alpha).count() == 3


def test_token_create_shows_secret_once_then_list_hides_it(world: World) -> None:
    client = api_session_client(world.member)
    created = client.post("/api/v1/tokens/", {"name": "ci", "scopes": ["read"]}, format="json")
    assert created.status_code == 201
    secret = created.json()["secret"]
    assert secret.startswith("gpt_")
    listed = client.get("/api/v1/tokens/").json()["results"]
    assert listed
    assert all("secret" not in row for row in listed)
    assert secret not in str(listed)


def test_token_revoke_through_api(world: World) -> None:
    client = api_session_client(world.member)
    token_id = client.post("/api/v1/tokens/", {"name": "x", "scopes": ["read"]}, format="json").json()["id"]
    assert client.delete(f"/api/v1/tokens/{token_id}/").status_code == 204
    assert ApiToken.objects.get(pk=token_id).revoked_at is not None
    assert AuditLog.objects.filter(action="token.revoke", object_id=str(token_id)).exists()
    # What DELETE revoked is gone from the API (the tokens page keeps the history).
    assert client.get(f"/api/v1/tokens/{token_id}/").status_code == 404
    assert token_id not in [row["id"] for row in client.get("/api/v1/tokens/").json()["results"]]
    assert client.delete(f"/api/v1/tokens/{token_id}/").status_code == 404


@pytest.mark.parametrize("query", ["page=", "page=last", "page=0", "page=x", "page_size="])
def test_a_page_that_is_not_a_number_is_refused(world: World, query: str) -> None:
    response = api_session_client(world.member).get(f"/api/v1/tokens/?{query}")
    assert response.status_code == 400, response.content
    assert "A whole number from 1" in response.json()["error"]["message"]


def test_bad_token_input(world: World) -> None:
    client = api_session_client(world.member)
    response = client.post(
        "/api/v1/tokens/", {"name": "x", "scopes": ["root"], "expires_at": "tomorrow"}, format="json"
    )
    assert response.status_code == 400
    assert {"scopes", "expires_at"} <= set(response.json()["error"]["fields"])
    assert not ApiToken.objects.exists()


def test_read_scope_cannot_write(world: World) -> None:
    client = api_client(world.owner, scopes=(TokenScope.READ,))
    response = client.post("/api/v1/projects/alpha/members/", {"email": "oscar@example.com"}, format="json")
    assert response.status_code == 403
    assert "scope" in response.json()["error"]["message"]
    assert not Membership.objects.filter(user=world.outsider, project=world.alpha).exists()


def test_submit_scope_cannot_manage_members_or_tokens(world: World) -> None:
    client = api_client(world.owner, scopes=(TokenScope.SUBMIT,))
    assert (
        client.post("/api/v1/tokens/", {"name": "x", "scopes": ["admin"]}, format="json").status_code == 403
    )
    assert (
        client.delete(f"/api/v1/projects/alpha/members/{world.member.memberships.get().pk}/").status_code
        == 403
    )


def test_unauthenticated_api_is_401_with_error_body(db: None) -> None:
    from rest_framework.test import APIClient

    response = APIClient().get("/api/v1/projects/")
    assert response.status_code in (401, 403)
    assert "error" in response.json()


def test_openapi_schema_and_docs_render(world: World) -> None:
    client = api_session_client(world.member)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/projects/" in schema.json()["paths"]
    assert client.get("/api/docs/").status_code == 200
