"""The cross-tenant probe registry: for every API route (as the OpenAPI schema names it) and websocket route,
how an attacker from another project tries to reach a victim project's objects.

Each app adds its routes here. `test_tenant_matrix` fails when the schema has a route with no probe,
so a new endpoint cannot ship without its cross-tenant check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from accounts.choices import NotifyEvent
from accounts.models import ApiToken, Membership, Project, User

Expect = Literal["not_found", "no_foreign_rows", "denied"]


@dataclass
class Victim:
    """The objects of the project under attack (and of its manager), by id."""

    project: Project
    manager: User
    membership: Membership
    token: ApiToken
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Probe:
    method: str
    url: str
    expect: Expect
    body: dict[str, Any] | None = None


ProbeFactory = Callable[[Victim], list[Probe]]
_ALL_OFF = dict.fromkeys(NotifyEvent.values, False)  # the attacker's own email choices

# Keys are "METHOD /path/{template}/" exactly as in the OpenAPI schema.
PROBES: dict[str, ProbeFactory] = {
    "GET /api/v1/me/": lambda v: [Probe("GET", "/api/v1/me/", "no_foreign_rows")],
    "POST /api/v1/auth/token/": lambda v: [
        Probe(
            "POST",
            "/api/v1/auth/token/",
            "denied",
            {"email": v.manager.email, "password": "guess", "name": "x", "scopes": ["admin"]},
        ),
    ],
    "GET /api/v1/projects/": lambda v: [Probe("GET", "/api/v1/projects/", "no_foreign_rows")],
    "GET /api/v1/projects/{slug}/": lambda v: [
        Probe("GET", f"/api/v1/projects/{v.project.slug}/", "not_found")
    ],
    "GET /api/v1/projects/{project_slug}/members/": lambda v: [
        Probe("GET", f"/api/v1/projects/{v.project.slug}/members/", "not_found"),
    ],
    "POST /api/v1/projects/{project_slug}/members/": lambda v: [
        Probe(
            "POST",
            f"/api/v1/projects/{v.project.slug}/members/",
            "not_found",
            {"email": "intruder@example.com", "role": "manager"},
        ),
    ],
    "GET /api/v1/projects/{project_slug}/members/{id}/": lambda v: [
        Probe("GET", f"/api/v1/projects/{v.project.slug}/members/{v.membership.pk}/", "not_found"),
    ],
    "PATCH /api/v1/projects/{project_slug}/members/{id}/": lambda v: [
        Probe(
            "PATCH",
            f"/api/v1/projects/{v.project.slug}/members/{v.membership.pk}/",
            "not_found",
            {"role": "viewer"},
        ),
    ],
    "DELETE /api/v1/projects/{project_slug}/members/{id}/": lambda v: [
        Probe("DELETE", f"/api/v1/projects/{v.project.slug}/members/{v.membership.pk}/", "not_found"),
    ],
    "GET /api/v1/tokens/": lambda v: [Probe("GET", "/api/v1/tokens/", "no_foreign_rows")],
    "POST /api/v1/tokens/": lambda v: [
        Probe("POST", "/api/v1/tokens/", "no_foreign_rows", {"name": "mine", "scopes": ["read"]})
    ],
    "GET /api/v1/tokens/{id}/": lambda v: [Probe("GET", f"/api/v1/tokens/{v.token.pk}/", "not_found")],
    "DELETE /api/v1/tokens/{id}/": lambda v: [Probe("DELETE", f"/api/v1/tokens/{v.token.pk}/", "not_found")],
    "GET /api/v1/projects/{project_slug}/webhook/": lambda v: [
        Probe("GET", f"/api/v1/projects/{v.project.slug}/webhook/", "not_found")
    ],
    "PUT /api/v1/projects/{project_slug}/webhook/": lambda v: [
        Probe(
            "PUT",
            f"/api/v1/projects/{v.project.slug}/webhook/",
            "not_found",
            {"url": "https://evil.example/x"},
        )
    ],
    "DELETE /api/v1/projects/{project_slug}/webhook/": lambda v: [
        Probe("DELETE", f"/api/v1/projects/{v.project.slug}/webhook/", "not_found")
    ],
    "POST /api/v1/projects/{project_slug}/webhook/ping/": lambda v: [
        Probe("POST", f"/api/v1/projects/{v.project.slug}/webhook/ping/", "not_found")
    ],
    "GET /api/v1/me/notifications/": lambda v: [Probe("GET", "/api/v1/me/notifications/", "no_foreign_rows")],
    "PUT /api/v1/me/notifications/": lambda v: [
        Probe("PUT", "/api/v1/me/notifications/", "no_foreign_rows", {"email": False, "events": _ALL_OFF})
    ],
}

# Routes that create the attacker's own objects: they change state, but never the victim's.
OWN_WRITES: set[str] = {"POST /api/v1/tokens/", "PUT /api/v1/me/notifications/"}

# Apps register functions that add their objects to the victim (e.g. a job) before probing.
VICTIM_SETUP: list[Callable[[Victim], None]] = []


def _victim_webhook(v: Victim) -> None:
    """The victim project has a webhook, so a PUT or DELETE that got through would change a row."""
    from accounts.models import ProjectWebhook

    ProjectWebhook.objects.create(project=v.project, url="https://hooks.example.org/victim", secret="v" * 64)


VICTIM_SETUP.append(_victim_webhook)

# Websocket routes (patterns of portal.routing) -> a path an attacker opens for the victim's object.
# The socket opens only for one's own objects; routes not listed here open for inventory every
# signed-in user may watch, and must then carry nothing of the victim (tests/security/test_ws_tenancy.py).
WS_PROBES: dict[str, Callable[[Victim], str]] = {}
WS_REFUSED: set[str] = set()

# workloads: the jobs and templates routes and the live jobs socket.
from tests.security.test_jobs_tenancy import register_job_probes  # noqa: E402

register_job_probes()

# gpu: nodes and GPUs inventory, the agents' ingest endpoint, the job telemetry socket.
from tests.gpu_e2e.tenancy_probes import register_gpu_probes  # noqa: E402

register_gpu_probes()

# workloads queue: temporary quota grants and the usage history.
from tests.security.queue_probes import register_queue_probes  # noqa: E402

register_queue_probes()
