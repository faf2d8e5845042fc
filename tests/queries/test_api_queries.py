"""Every GET endpoint of the REST API runs the same number of SQL queries at N rows and at 3N rows
(the API benchmark's goal: constant SQL queries per request), for a member's token and an operator's token.

The endpoints come from the OpenAPI schema, so a new one fails here until it has a case below.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from drf_spectacular.generators import SchemaGenerator

from accounts.models import User
from tests.fixtures.personas import World, api_client
from tests.queries.scale import Fixed, fixed, grow

N = 3  # rows per kind at the first measurement; 3N at the second (all fit in one page of 50)

Case = Callable[[Fixed, User], str]
CASES: dict[str, Case] = {
    "v1_me_retrieve": lambda fx, u: "/api/v1/me/",
    "v1_me_notifications_retrieve": lambda fx, u: "/api/v1/me/notifications/",
    "v1_projects_list": lambda fx, u: "/api/v1/projects/",
    "v1_projects_retrieve": lambda fx, u: "/api/v1/projects/alpha/",
    "v1_projects_members_list": lambda fx, u: "/api/v1/projects/alpha/members/",
    "v1_projects_webhook_retrieve": lambda fx, u: "/api/v1/projects/hooked/webhook/",
    "v1_projects_allowed_retrieve": lambda fx, u: "/api/v1/projects/alpha/allowed/",
    "v1_projects_idle_reclaim_retrieve": lambda fx, u: "/api/v1/projects/alpha/idle-reclaim/",
    "v1_projects_members_retrieve": lambda fx, u: f"/api/v1/projects/alpha/members/{_membership(fx, u)}/",
    "v1_tokens_list": lambda fx, u: "/api/v1/tokens/",
    "v1_tokens_retrieve": lambda fx, u: f"/api/v1/tokens/{u.api_tokens.earliest('pk').pk}/",
    "v1_jobs_list": lambda fx, u: "/api/v1/jobs/",
    "v1_jobs_retrieve": lambda fx, u: f"/api/v1/jobs/{fx.job.uid}/",
    "v1_jobs_events_list": lambda fx, u: f"/api/v1/jobs/{fx.job.uid}/events/",
    "v1_jobs_logs_retrieve": lambda fx, u: f"/api/v1/jobs/{fx.job.uid}/logs/",
    "v1_jobs_accounting_retrieve": lambda fx, u: "/api/v1/jobs/accounting/?group=job",
    "v1_templates_list": lambda fx, u: "/api/v1/templates/",
    "v1_templates_retrieve": lambda fx, u: f"/api/v1/templates/{fx.template.pk}/",
    "v1_grants_list": lambda fx, u: "/api/v1/grants/",
    "v1_usage_list": lambda fx, u: "/api/v1/usage/?group=user",
    "v1_nodes_list": lambda fx, u: "/api/v1/nodes/",
    "v1_nodes_retrieve": lambda fx, u: f"/api/v1/nodes/{fx.node.name}/",
    "v1_gpus_list": lambda fx, u: "/api/v1/gpus/",
    "v1_gpus_retrieve": lambda fx, u: f"/api/v1/gpus/{fx.node.gpus.earliest('index').uuid}/",
}


def _membership(fx: Fixed, user: User) -> int:
    return fx.world.alpha.memberships.get(user=fx.world.member).pk  # the same row for both personas


def get_operations() -> list[str]:
    schema = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    ops = [op for methods in schema["paths"].values() for method, op in methods.items() if method == "get"]
    return sorted(op["operationId"] for op in ops)


def test_every_get_endpoint_has_a_case() -> None:
    missing = sorted(set(get_operations()) - set(CASES))
    stale = sorted(set(CASES) - set(get_operations()))
    assert not missing, f"GET endpoints without a constant-query case in {__name__}: {missing}"
    assert not stale, f"cases for endpoints that no longer exist: {stale}"


def rows_in(response: Any) -> int:
    """Rows a response carries: a page's results, a JSON list, CSV lines; 1 for one object. For a
    page, its length in bytes stands in (more rows, a longer page)."""
    if response["Content-Type"].startswith("text/html"):
        return len(bytes(response.content))
    if response["Content-Type"].startswith("text/csv"):
        return int(response.content.count(b"\n"))
    body = json.loads(response.content) if response["Content-Type"].startswith("application/json") else None
    if isinstance(body, dict) and "results" in body:
        return len(body["results"])
    return len(body) if isinstance(body, list) else 1


def measure(client: Client, url: str) -> tuple[int, int, list[str]]:
    """(queries, rows, the queries' SQL) of one GET."""
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return len(ctx.captured_queries), rows_in(response), [q["sql"][:160] for q in ctx.captured_queries]


def assert_constant(client: Client, url: Callable[[], str], fx: Fixed, *, grows: bool) -> None:
    """Same count at N rows and at 3N rows. A first call before measuring settles one-off writes (a
    token's last use) and caches. Lists must really have grown, or the equality proves nothing."""
    grow(fx, N)
    client.get(url())
    small, rows_small, _ = measure(client, url())
    grow(fx, 2 * N)
    large, rows_large, sql = measure(client, url())
    if grows:
        assert rows_large > rows_small, f"{url()}: the list did not grow ({rows_small} -> {rows_large} rows)"
    assert small == large, f"{url()}: {small} queries at {N} rows, {large} at {3 * N}:\n" + "\n".join(sql)


@pytest.mark.django_db
@pytest.mark.parametrize("persona", ["member", "admin"])
@pytest.mark.parametrize("operation", sorted(CASES))
def test_constant_queries(world: World, persona: str, operation: str) -> None:
    user: User = getattr(world, persona)
    fx = fixed(world)
    client = api_client(user)
    grows = operation.endswith("_list") or operation == "v1_jobs_accounting_retrieve"
    assert_constant(client, lambda: CASES[operation](fx, user), fx, grows=grows)
