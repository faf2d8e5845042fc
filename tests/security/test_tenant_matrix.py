"""Every API route, from the OpenAPI schema, probed by users of other projects with session and
token auth: foreign objects answer 404, lists hold no foreign rows, nothing changes. A route without
a probe fails the test."""

from __future__ import annotations

import csv
import functools
import io
import json
from typing import Any

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from accounts import services
from accounts.choices import Role, TokenScope
from accounts.models import AuditLog, Membership, Project, User
from tests.fixtures.personas import World, api_session_client, make_project, make_user
from tests.security.probes import OWN_WRITES, PROBES, VICTIM_SETUP, Probe, Victim

pytestmark = pytest.mark.django_db

OUR_APPS = ("accounts", "gpu", "workloads")
# Columns that record that a request happened, not a state change the attacker caused.
BOOKKEEPING = frozenset({"last_used_at", "last_used_ip", "last_login"})
ALL_SCOPES = (TokenScope.READ, TokenScope.SUBMIT, TokenScope.ADMIN)


@functools.cache
def schema_routes() -> frozenset[str]:
    generator = SchemaGenerator()  # type: ignore[no-untyped-call]
    schema: dict[str, Any] = generator.get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    return frozenset(
        f"{method.upper()} {path}"
        for path, ops in schema["paths"].items()
        for method in ops
        if method in ("get", "post", "put", "patch", "delete")
    )


@functools.cache
def fingerprint_sql() -> str:
    """One query that digests every row of our apps' tables in Postgres: a probe is checked about
    200 times a pair, and a Python digest of each table took 13 of a pair's 17 s."""
    quote = connection.ops.quote_name
    digests = []
    for model in apps.get_models():
        if model._meta.app_label not in OUR_APPS or model is AuditLog:
            continue
        columns = [quote(f.column) for f in model._meta.concrete_fields if f.name not in BOOKKEEPING]
        order = ", ".join(quote(f.column) for f in model._meta.pk_fields)  # a composite key has several
        digests.append(
            # Names from the models' own metadata, quoted; no input reaches this SQL.
            f"(SELECT md5(coalesce(string_agg(row({', '.join(columns)})::text, '|'"  # noqa: S608
            f" ORDER BY {order}), '')) FROM {quote(model._meta.db_table)})"
        )
    return f"SELECT concat_ws(',', {', '.join(digests)})"


def fingerprint() -> str:
    """A digest of every row of our apps' tables, so any write by a probe shows."""
    with connection.cursor() as cursor:
        cursor.execute(fingerprint_sql())
        digest: str = cursor.fetchone()[0]
    return digest


def gamma(world: World) -> tuple[Project, User]:
    """The third project and its manager (gina), made on first use."""
    manager = User.objects.filter(email="gina@example.com").first() or make_user("gina@example.com")
    project = Project.objects.filter(slug="gamma").first() or make_project("gamma")
    Membership.objects.get_or_create(project=project, user=manager, defaults={"role": Role.MANAGER})
    return project, manager


def victim_of(world: World, slug: str) -> Victim:
    project, manager = {
        "alpha": (world.alpha, world.owner),
        "beta": (world.beta, world.outsider),
        "gamma": gamma(world),
    }[slug]
    token, _ = services.token_create(user=manager, name="victim", scopes=list(ALL_SCOPES), expires_at=None)
    victim = Victim(
        project=project,
        manager=manager,
        token=token,
        membership=Membership.objects.get(project=project, user=manager),
    )
    for setup in VICTIM_SETUP:
        setup(victim)
    return victim


def clients_for(user: User) -> dict[str, APIClient]:
    token_client = APIClient()
    _, secret = services.token_create(user=user, name="attacker", scopes=list(ALL_SCOPES), expires_at=None)
    token_client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return {"session": api_session_client(user), "token": token_client}


def assert_holds(probe: Probe, response: Any, victim: Victim) -> None:
    where = f"{probe.method} {probe.url} -> {response.status_code} {response.content[:300]!r}"
    if probe.expect == "not_found":
        assert response.status_code == 404, where
    elif probe.expect == "denied":
        assert response.status_code in (400, 401, 403, 404, 429), where
    else:
        assert response.status_code < 500, where
        values = body_values(response)
        for marker in (
            victim.project.slug,
            victim.manager.email,
            victim.token.prefix,
            *victim.extra.get("markers", []),
        ):
            assert marker not in values, f"foreign row leaked: {marker} in {where}"


def body_values(response: Any) -> set[str]:
    """Every string value of a JSON body, or every cell of a CSV body."""
    text = (
        response.content.decode() if not response.streaming else b"".join(response.streaming_content).decode()
    )
    if response.get("Content-Type", "").startswith("text/csv"):
        return {cell for row in csv.reader(io.StringIO(text)) for cell in row}
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                found.add(str(key))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif value is not None:
            found.add(str(value))

    walk(json.loads(text) if text.strip() else None)
    return found


def test_every_api_route_has_a_probe(db: None) -> None:
    missing = schema_routes() - set(PROBES)
    assert not missing, f"routes without a cross-tenant probe in tests/security/probes.py: {sorted(missing)}"


def test_the_fingerprint_sees_a_state_change_but_not_bookkeeping(world: World) -> None:
    victim_of(world, "beta")
    before = fingerprint()
    User.objects.filter(pk=world.owner.pk).update(last_login=timezone.now())
    assert fingerprint() == before
    Membership.objects.filter(project=world.beta).update(role=Role.VIEWER)
    assert fingerprint() != before


# Three projects: each is attacked from both others, by every role of alpha.
PAIRS = [
    ("outsider", "alpha"),
    ("gamma", "alpha"),
    ("owner", "beta"),
    ("member", "beta"),
    ("viewer", "beta"),
    ("gamma", "beta"),
    ("owner", "gamma"),
    ("outsider", "gamma"),
]


@pytest.mark.parametrize(("attacker_name", "slug"), PAIRS)
def test_foreign_objects_are_invisible_and_untouchable(world: World, attacker_name: str, slug: str) -> None:
    attacker: User = gamma(world)[1] if attacker_name == "gamma" else getattr(world, attacker_name)
    victim = victim_of(world, slug)
    for auth, client in clients_for(attacker).items():
        for route in sorted(schema_routes() & set(PROBES)):
            for probe in PROBES[route](victim):
                before = fingerprint()
                response = client.generic(
                    probe.method, probe.url, data=_json(probe.body), content_type="application/json"
                )
                assert_holds(probe, response, victim)
                if route not in OWN_WRITES:
                    assert fingerprint() == before, f"{auth} {probe.method} {probe.url} changed state"


def _json(body: dict[str, Any] | None) -> str:
    return json.dumps(body) if body is not None else ""
