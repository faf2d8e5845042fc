"""A token created through another token's request never outlives it and is revoked with it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import services
from accounts.models import ApiToken, User
from tests.fixtures.personas import World, api_session_client, session_client

pytestmark = pytest.mark.django_db


def _client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def _mint(client: APIClient, **body: str) -> tuple[int, dict[str, Any]]:
    response = client.post(
        "/api/v1/tokens/", {"name": "child", "scopes": ["read", "admin"], **body}, format="json"
    )
    return response.status_code, response.json()


def _parent(user: User, days: int = 10) -> tuple[ApiToken, str]:
    return services.token_create(
        user=user, name="parent", scopes=["read", "admin"], expires_at=timezone.now() + timedelta(days=days)
    )


def test_a_token_cannot_mint_a_token_that_outlives_it(world: World) -> None:
    parent, secret = _parent(world.member)
    later = (timezone.now() + timedelta(days=30)).isoformat()
    status, body = _mint(_client(secret), expires_at=later)
    assert status == 400
    assert "expires_at" in body["error"]["fields"]
    assert ApiToken.objects.filter(user=world.member).count() == 1
    status, body = _mint(_client(secret))  # the default 90 days is cut to the parent's end
    assert status == 201
    child = ApiToken.objects.get(pk=body["id"])
    assert child.parent == parent
    assert parent.expires_at is not None
    assert child.expires_at is not None
    assert child.expires_at <= parent.expires_at


def test_revoking_a_token_revokes_its_children_and_theirs(world: World) -> None:
    parent, secret = _parent(world.member)
    _, child = _mint(_client(secret))
    _, grandchild = _mint(_client(str(child["secret"])))
    grandchild_client = _client(str(grandchild["secret"]))
    assert grandchild_client.get("/api/v1/me/").status_code == 200
    assert api_session_client(world.member).delete(f"/api/v1/tokens/{parent.pk}/").status_code == 204
    assert ApiToken.objects.filter(user=world.member, revoked_at__isnull=True).count() == 0
    assert grandchild_client.get("/api/v1/me/").status_code == 401


def test_the_admins_revoke_action_revokes_the_children_too(world: World) -> None:
    parent, secret = _parent(world.member)
    _mint(_client(secret))
    response = session_client(world.admin).post(
        "/admin/accounts/apitoken/", {"action": "revoke", "_selected_action": [parent.pk]}
    )
    assert response.status_code == 302
    assert ApiToken.objects.filter(user=world.member, revoked_at__isnull=True).count() == 0
