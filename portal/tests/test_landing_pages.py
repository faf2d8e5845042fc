"""Where people land and what they see when they may not do something."""

from __future__ import annotations

from datetime import UTC

import pytest
from allauth.mfa.models import Authenticator
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory
from django.views.defaults import permission_denied

from tests.fixtures.personas import World, session_client
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = pytest.mark.django_db


def test_operators_land_on_the_cluster_map_and_users_on_their_dashboard(world: World) -> None:
    assert Authenticator.objects.filter(user=world.admin).exists()  # an operator: staff with MFA
    assert session_client(world.admin).get("/")["Location"] == "/cluster/"
    assert session_client(world.member).get("/")["Location"] == "/dashboard/"


def test_a_refused_page_says_why_and_offers_a_way_back(world: World) -> None:
    request = RequestFactory().get("/jobs/")
    request.user = world.viewer
    response = permission_denied(request, PermissionDenied("Viewers read this project's jobs."))
    page = response.content.decode()
    assert response.status_code == 403
    assert "Viewers read this project&#x27;s jobs." in page
    assert 'href="/dashboard/"' in page


def test_cancel_and_rerun_ask_before_they_act(world: World) -> None:
    allow_images(world.alpha)
    job = services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE, "gpus": 1})
    page = session_client(world.member).get(f"/jobs/{job.uid}/").content.decode()
    assert page.count("data-confirm=") == 2
    assert "portal/confirm.js" in page
    assert Client().get("/static/portal/confirm.js").status_code == 200


def test_a_researchers_home_shows_their_jobs_quota_in_use_usage_and_templates(world: World) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from accounts.models import Quota
    from workloads.accounting import usage_history
    from workloads.choices import JobState
    from workloads.models import Job, JobTemplate

    now = timezone.now()
    Quota.objects.filter(project=world.alpha).update(gpus=8, cpu_millicores=16000, memory_mib=65536)

    def job(**fields: object) -> Job:
        return Job.objects.create(project=world.alpha, owner=world.member, image=IMAGE, **fields)

    running = job(
        name="resnet", gpus=2, state=JobState.RUNNING, node="gpu-node-1", started_at=now - timedelta(hours=3)
    )
    queued = job(
        name="bert", gpus=8, queue_explanation={"code": "quota", "sentence": "project quota 2/8 GPUs in use"}
    )
    job(
        name="old",
        gpus=1,
        state=JobState.SUCCEEDED,
        started_at=now - timedelta(days=9),
        finished_at=now - timedelta(days=9) + timedelta(hours=4),
    )
    Job.objects.create(
        project=world.alpha, owner=world.owner, image=IMAGE, name="theirs", gpus=1, state=JobState.RUNNING
    )
    JobTemplate.objects.create(
        project=world.alpha, name="fine-tune", spec={"image": IMAGE}, created_by=world.member
    )

    page = session_client(world.member).get("/dashboard/").content.decode()
    assert f'data-job="{running.uid}"' in page
    assert f'data-job="{queued.uid}"' in page
    assert "theirs" not in page
    assert ">old<" not in page
    assert f"running on gpu-node-1 since {(now - timedelta(hours=3)).astimezone(UTC):%H:%M} UTC" in page
    assert "waiting: project quota 2/8 GPUs in use" in page
    assert '<span data-quota="GPUs">3 of 8 in use</span>' in page  # the project's, the owner's job too
    rows = usage_history(jobs=Job.objects.filter(owner=world.member), group="user", days=14)
    week = round(
        sum(r["gpu_hours"] for r in rows if r["day"] >= (now - timedelta(days=6)).date().isoformat()), 2
    )
    assert 5.9 < week < 6.1  # 2 GPUs for 3 hours
    assert f"<strong>{week}</strong> GPU-hours in the last 7 days, against <strong>4.0</strong>" in page
    assert "Idle GPUs" not in page
    Job.objects.filter(pk=running.pk).update(idle_warned_at=now)
    page = session_client(world.member).get("/dashboard/").content.decode()
    assert ">resnet</a>: its GPUs are idle: it will be suspended unless" in page
    assert "fine-tune</a>" in page
    assert "?template=" in page
