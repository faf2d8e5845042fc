"""The C-parsed timestamptz reader (portal.dbtypes) gives what Django's own loader gives, value for
value and error for error, on the real Postgres the tests run against."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader  # type: ignore[import-untyped]
from django.db.utils import DataError

from accounts.models import User
from portal.dbtypes import UtcTimestamptzLoader, use_fast_timestamps
from tests.fixtures.personas import World

pytestmark = pytest.mark.django_db

TEXTS = [
    "2026-12-06 17:52:47.123456+00",
    "2026-12-06 17:52:47.12+00",  # Postgres drops trailing zeros of the fraction
    "2026-12-06 17:52:47+00",
    "2026-03-29 01:30:00+02",  # written in another zone: the session still answers in UTC
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00",
]
OUT_OF_RANGE = ["0044-03-15 12:00:00+00 BC", "infinity", "-infinity"]


def read(sql: str, params: list[Any], use: Callable[[Any], None]) -> Any:
    with connection.cursor() as cursor:
        use(cursor.cursor)
        cursor.execute(sql, params)
        return cursor.fetchall()


def ours(cursor: Any) -> None:
    cursor.adapters.register_loader("timestamptz", UtcTimestamptzLoader)


def djangos(cursor: Any) -> None:
    register_tzloader(connection.timezone, cursor)


def test_every_django_connection_reads_timestamps_with_it() -> None:
    connection.ensure_connection()
    assert connection.connection.adapters.get_loader(1184, 0) is UtcTimestamptzLoader  # timestamptz, text


@pytest.mark.parametrize("text", TEXTS)
def test_a_value_reads_as_djangos_loader_reads_it(text: str) -> None:
    sql = "SELECT %s::timestamptz"
    got, want = read(sql, [text], ours)[0][0], read(sql, [text], djangos)[0][0]
    assert (got, got.tzinfo, type(got)) == (want, want.tzinfo, type(want))
    assert got.tzinfo is UTC


@pytest.mark.parametrize("text", OUT_OF_RANGE)
def test_what_python_cannot_hold_fails_as_in_django(text: str) -> None:
    sql = "SELECT %s::timestamptz"
    with pytest.raises(DataError) as theirs:
        read(sql, [text], djangos)
    with pytest.raises(DataError) as mine:
        read(sql, [text], ours)
    assert str(mine.value) == str(theirs.value)


def test_a_model_round_trips_through_it(world: World) -> None:
    when = datetime(2026, 12, 6, 17, 52, 47, 120000, tzinfo=UTC)
    User.objects.filter(pk=world.member.pk).update(last_login=when)
    user = User.objects.get(pk=world.member.pk)
    assert user.last_login == when
    assert user.last_login.tzinfo is UTC


class FakeAdapters:
    def __init__(self) -> None:
        self.registered: list[Any] = []

    def register_loader(self, name: str, loader: Any) -> None:
        self.registered.append((name, loader))


@pytest.mark.parametrize(
    ("vendor", "zone", "expected"),
    [
        ("postgresql", UTC, [("timestamptz", UtcTimestamptzLoader)]),
        ("postgresql", ZoneInfo("Europe/Paris"), []),  # DATABASES TIME_ZONE: Django's loader stays
        ("postgresql", None, []),  # USE_TZ off: naive datetimes, Django's loader stays
        ("sqlite", UTC, []),
    ],
)
def test_it_is_used_only_where_the_session_is_in_utc(vendor: str, zone: Any, expected: list[Any]) -> None:
    adapters = FakeAdapters()
    fake = SimpleNamespace(vendor=vendor, timezone=zone, connection=SimpleNamespace(adapters=adapters))
    use_fast_timestamps(sender=None, connection=fake)  # type: ignore[arg-type]
    assert adapters.registered == expected
