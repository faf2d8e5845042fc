"""Roles inside a project: members cancel and rerun their own jobs, managers every job of the project,
viewers and outsiders none. The same answer through the API (tokens) and the pages (sessions)."""

from __future__ import annotations

import pytest

from accounts.choices import Role
from accounts.models import Membership, User
from tests.fixtures.personas import World, api_client, make_user, session_client
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = pytest.mark.django_db
# who acts -> may they cancel / rerun a job that a member (bob) submitted?
EXPECTED = {"owner": True, "member": True, "other_member": False, "viewer": False, "outsider": False}


def _people(world: World) -> dict[str, User]:
    other = make_user("mona@example.com")
    Membership.objects.create(project=world.alpha, user=other, role=Role.MEMBER)
    return {
        "owner": world.owner,
        "member": world.member,
        "other_member": other,
        "viewer": world.viewer,
        "outsider": world.outsider,
    }


def _bobs_job(world: World) -> Job:
    return services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE, "gpus": 1})


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_cancel_and_rerun_through_the_api_follow_the_role(world: World, who: str) -> None:
    allow_images(world.alpha)
    actor = _people(world)[who]
    client = api_client(actor)
    rerun = client.post(f"/api/v1/jobs/{_bobs_job(world).uid}/rerun/", {}, format="json")
    job = _bobs_job(world)
    cancel = client.post(f"/api/v1/jobs/{job.uid}/cancel/")
    job.refresh_from_db()
    if EXPECTED[who]:
        assert (rerun.status_code, cancel.status_code, job.state) == (201, 200, JobState.CANCELLED)
    else:
        refused = 404 if who == "outsider" else 403  # a job of a project one cannot see does not exist
        assert (rerun.status_code, cancel.status_code, job.state) == (refused, refused, JobState.QUEUED)
        if refused == 403:  # they can see the job, so the answer says why
            assert "own jobs" in cancel.json()["error"]["message"]


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_cancel_on_the_job_page_follows_the_role(world: World, who: str) -> None:
    allow_images(world.alpha)
    actor = _people(world)[who]
    job = _bobs_job(world)
    client = session_client(actor)
    page = client.get(f"/jobs/{job.uid}/")
    client.post(f"/jobs/{job.uid}/cancel/")
    job.refresh_from_db()
    assert (job.state == JobState.CANCELLED) is EXPECTED[who]
    if page.status_code == 200:
        assert ("data-confirm=" in page.content.decode()) is EXPECTED[who]  # buttons only for who may
