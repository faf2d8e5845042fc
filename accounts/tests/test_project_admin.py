"""Projects added in the admin are whole: a quota row like every other project, pages that open."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import AuditLog, Project, Quota
from tests.fixtures.personas import World

pytestmark = pytest.mark.django_db


def _admin_client(world: World) -> Client:
    client = Client()
    client.force_login(world.admin)
    return client


def test_a_project_added_in_the_admin_gets_its_quota_and_its_pages_open(world: World) -> None:
    client = _admin_client(world)
    form = {
        "slug": "gamma",
        "name": "Gamma lab",
        "description": "",
        "is_active": "on",
        **{
            f"{p}-{k}": v
            for p in ("quota", "memberships", "user_caps")
            for k, v in (("TOTAL_FORMS", "0"), ("INITIAL_FORMS", "0"))
        },
    }
    response = client.post("/admin/accounts/project/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    gamma = Project.objects.get(slug="gamma")
    assert Quota.objects.filter(project=gamma).exists()
    assert AuditLog.objects.filter(action="project.create", project=gamma).exists()
    assert client.get(f"/admin/accounts/project/{gamma.pk}/change/").status_code == 200
    assert client.get(f"/api/v1/projects/{gamma.slug}/").json()["quota"]["gpus"] == 0
