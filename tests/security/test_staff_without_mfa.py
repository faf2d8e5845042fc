"""A staff account without MFA holds no operator power outside the admin either.

Until it has a TOTP authenticator, a staff user is a plain user of their own projects on the API,
the pages, the sockets and the GPU views, and gets no API token; with one, operator power returns.
"""

from __future__ import annotations

import pytest
from allauth.mfa.models import Authenticator
from rest_framework.test import APIClient

from accounts import selectors
from accounts.models import User
from gpu.selectors import user_namespaces
from tests.fixtures.personas import PASSWORD, World, api_session_client, session_client
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import jobs as job_services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = pytest.mark.django_db


def _staff(user: User, *, mfa: bool) -> User:
    """Made staff; with `mfa`, holding a TOTP set up before the grant (so it counts for operators)."""
    if mfa:
        Authenticator.objects.create(
            user=user, type=Authenticator.Type.TOTP, data={"secret": "JBSWY3DPEHPK3PXP"}
        )
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    return user


def _foreign_job(world: World) -> Job:
    allow_images(world.beta)
    return job_services.job_submit(
        actor=world.outsider, project=world.beta, data={"image": IMAGE, "name": "beta-job"}
    )


def test_staff_without_mfa_sees_no_other_projects_jobs_through_the_api(world: World) -> None:
    job = _foreign_job(world)
    client = api_session_client(_staff(world.member, mfa=False))
    listed = client.get("/api/v1/jobs/")
    assert listed.status_code == 200
    assert str(job.uid) not in listed.content.decode()
    assert client.get(f"/api/v1/jobs/{job.uid}/").status_code == 404
    assert client.get("/api/v1/projects/beta/").status_code == 404


def test_staff_without_mfa_cannot_cancel_another_projects_job(world: World) -> None:
    job = _foreign_job(world)
    client = api_session_client(_staff(world.member, mfa=False))
    assert client.post(f"/api/v1/jobs/{job.uid}/cancel/").status_code == 404
    job.refresh_from_db()
    assert job.state == JobState.QUEUED


def test_staff_without_mfa_gets_no_api_token(world: World) -> None:
    staff = _staff(world.member, mfa=False)
    by_session = api_session_client(staff).post(
        "/api/v1/tokens/", {"name": "cli", "scopes": ["read"]}, format="json"
    )
    assert by_session.status_code == 403
    assert "two-factor" in by_session.json()["error"]["message"]
    by_password = APIClient().post(
        "/api/v1/auth/token/",
        {"email": staff.email, "password": PASSWORD, "name": "cli", "scopes": ["read"]},
        format="json",
    )
    assert by_password.status_code == 403
    page = session_client(staff).post("/me/tokens/", {"name": "cli", "scopes": ["read"], "days": 30})
    assert "two-factor" in page.content.decode()
    assert not staff.api_tokens.exists()


def test_staff_without_mfa_sees_only_their_projects_gpu_namespaces(world: World) -> None:
    staff = _staff(world.member, mfa=False)
    assert user_namespaces(user=staff) == frozenset({world.alpha.namespace})
    assert [p.slug for p in selectors.project_list(user=staff)] == ["alpha"]


def test_staff_with_mfa_keeps_operator_power(world: World) -> None:
    job = _foreign_job(world)
    staff = _staff(world.member, mfa=True)
    client = api_session_client(staff)
    assert str(job.uid) in client.get("/api/v1/jobs/").content.decode()
    assert client.post(f"/api/v1/jobs/{job.uid}/cancel/").status_code == 200
    token = client.post("/api/v1/tokens/", {"name": "cli", "scopes": ["read"]}, format="json")
    assert token.status_code == 201
    assert user_namespaces(user=staff) is None


def test_an_inactive_staff_user_with_mfa_is_no_operator(world: World) -> None:
    staff = _staff(world.member, mfa=True)
    staff.is_active = False
    assert not selectors.is_operator(staff)
