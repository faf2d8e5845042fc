"""The main pages (dashboard, jobs, job detail, cluster map, node, project, tokens) run the same number
of SQL queries at N rows and at 3N rows, for a member and an operator (signed in by session)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accounts.models import Quota, User
from tests.fixtures.personas import World, session_client
from tests.queries.scale import Fixed, fixed
from tests.queries.test_api_queries import assert_constant

PAGES: dict[str, Callable[[Fixed], str]] = {
    "dashboard": lambda fx: "/dashboard/",
    "jobs": lambda fx: "/jobs/",
    "job": lambda fx: f"/jobs/{fx.job.uid}/",
    "cluster": lambda fx: "/cluster/",
    "node": lambda fx: f"/cluster/nodes/{fx.node.name}/",
    "project": lambda fx: "/me/projects/alpha/",
    "project_webhook": lambda fx: _hooked(fx),  # the member manages it: webhook form, growing delivery log
    "tokens": lambda fx: "/me/tokens/",
    "templates": lambda fx: "/jobs/projects/alpha/templates/",
    "submit": lambda fx: "/jobs/submit/",
}


def _hooked(fx: Fixed) -> str:
    Quota.objects.get_or_create(project=fx.webhook.project)  # every project has one; scale.py makes it bare
    return f"/me/projects/{fx.webhook.project.slug}/"


@pytest.mark.django_db
@pytest.mark.parametrize("persona", ["member", "admin"])
@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_constant_queries(world: World, persona: str, page: str) -> None:
    user: User = getattr(world, persona)
    fx = fixed(world)
    assert_constant(session_client(user), lambda: PAGES[page](fx), fx, grows=True)
