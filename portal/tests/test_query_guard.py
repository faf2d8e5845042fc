"""A NUL in a query parameter is a 400 that says so, on the API and on pages, before any view reads
it (else it reaches Postgres, which refuses NUL in text: a 500)."""

from __future__ import annotations

import pytest

from tests.fixtures.personas import World, api_client, session_client

pytestmark = pytest.mark.django_db


def test_the_api_refuses_a_nul_in_a_filter_with_its_json_error(world: World) -> None:
    client = api_client(world.member)
    response = client.get("/api/v1/templates/?project=alpha&name=a%00b")
    assert response.status_code == 400
    error = response.json()["error"]
    assert "NUL" in error["message"]
    assert list(error["fields"]) == ["name"]
    assert client.get("/api/v1/templates/?project=alpha&name=ab").status_code == 200


def test_a_page_refuses_it_too(world: World) -> None:
    client = session_client(world.member)
    response = client.get("/jobs/?project=al%00pha")
    assert response.status_code == 400
    assert "NUL" in response.content.decode()
    assert client.get("/jobs/?project=alpha").status_code == 200
