"""With the database unreachable, the API and the pages answer 503 with a plain message, never a
stack trace or a 500. The outage is real: the test's connection goes to a port nothing listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection

from tests.fixtures.personas import World, api_client, session_client

pytestmark = pytest.mark.django_db(transaction=True)


def _dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again at once: nothing listens there


@contextmanager
def database_down() -> Iterator[None]:
    port = connection.settings_dict["PORT"]
    connection.close()
    connection.settings_dict["PORT"] = str(_dead_port())
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port


def test_the_api_answers_503_in_its_error_body(world: World) -> None:
    client = api_client(world.member)  # the token is made while the database is up
    client.raise_request_exception = False
    with database_down():
        response = client.get("/api/v1/jobs/")
    assert response.status_code == 503
    assert response["Retry-After"] == "60"
    assert response.json()["error"]["code"] == "database_unavailable"
    assert "Running jobs go on" in response.json()["error"]["message"]


def test_a_page_answers_503_with_a_plain_message(world: World) -> None:
    client = session_client(world.member)
    client.raise_request_exception = False
    with database_down():
        response = client.get("/jobs/")
    page = response.content.decode()
    assert response.status_code == 503
    assert "database cannot be reached" in page
    assert "Traceback" not in page
