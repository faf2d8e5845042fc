"""Idle reclaim from the job page and the API: the banner with its snooze and resume buttons, the
manager's exemption, the job's `idle` field, and who may do what."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.fixtures.personas import World, api_client, session_client
from workloads.choices import JobState
from workloads.models import Job, JobEvent, QueueSettings

pytestmark = pytest.mark.django_db


def _job(world: World, **fields: object) -> Job:
    return Job.objects.create(
        project=world.alpha,
        owner=world.member,
        image="pytorch",
        gpus=1,
        node="gpu-node-0",
        started_at=timezone.now() - timedelta(hours=1),
        **fields,
    )


def test_the_job_page_shows_the_warning_and_snoozes_it(world: World) -> None:
    job = _job(world, state=JobState.RUNNING, idle_warned_at=timezone.now())
    client = session_client(world.member)
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert 'id="idle-warning"' in page
    assert "Snooze (2 of 2 left)" in page
    assert 'id="idle-exempt"' not in page  # members do not exempt
    response = client.post(f"/jobs/{job.uid}/idle/snooze/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert (job.idle_warned_at, job.idle_snoozes) == (None, 1)
    assert JobEvent.objects.filter(job=job, reason="idle warning snoozed").exists()
    assert 'id="idle-warning"' not in client.get(f"/jobs/{job.uid}/").content.decode()


def test_the_job_page_resumes_a_suspended_job(world: World) -> None:
    job = _job(world, state=JobState.PREEMPTED, idle_suspended_at=timezone.now() - timedelta(minutes=30))
    client = session_client(world.member)
    page = client.get(f"/jobs/{job.uid}/").content.decode()
    assert 'id="idle-suspended"' in page
    assert "0.50 GPU-hours" in page
    client.post(f"/jobs/{job.uid}/idle/resume/")
    job.refresh_from_db()
    assert job.idle_suspended_at is None
    assert job.idle_reclaimed_gpu_hours == pytest.approx(0.5, abs=0.01)


def test_a_manager_exempts_from_the_page_a_viewer_cannot_snooze(world: World) -> None:
    job = _job(world, state=JobState.RUNNING, idle_warned_at=timezone.now())
    manager = session_client(world.owner)
    assert 'id="idle-exempt"' in manager.get(f"/jobs/{job.uid}/").content.decode()
    manager.post(f"/jobs/{job.uid}/idle/exempt/", {"exempt": "1"})
    assert Job.objects.get(pk=job.pk).idle_exempt
    session_client(world.viewer).post(f"/jobs/{job.uid}/idle/snooze/")
    assert Job.objects.get(pk=job.pk).idle_snoozes == 0


def test_the_api_shows_idle_and_snoozes_resumes_and_exempts(world: World) -> None:
    warned = _job(world, state=JobState.RUNNING, idle_warned_at=timezone.now())
    member = api_client(world.member)
    body = member.get(f"/api/v1/jobs/{warned.uid}/").json()
    assert body["idle"]["warned_at"] is not None
    assert body["idle"]["snoozes"] == 0
    response = member.post(f"/api/v1/jobs/{warned.uid}/idle-snooze/")
    assert response.status_code == 200, response.content
    assert response.json()["idle"] == {
        "exempt": False,
        "warned_at": None,
        "snoozes": 1,
        "suspended_at": None,
        "reclaimed_gpu_hours": 0.0,
    }
    assert member.post(f"/api/v1/jobs/{warned.uid}/idle-snooze/").status_code == 400  # no warning now
    assert (
        member.post(f"/api/v1/jobs/{warned.uid}/idle-exempt/", {"exempt": True}, format="json").status_code
        == 403
    )
    manager = api_client(world.owner)
    response = manager.post(f"/api/v1/jobs/{warned.uid}/idle-exempt/", {"exempt": True}, format="json")
    assert response.json()["idle"]["exempt"] is True
    suspended = _job(world, state=JobState.PREEMPTED, idle_suspended_at=timezone.now())
    assert api_client(world.viewer).post(f"/api/v1/jobs/{suspended.uid}/idle-resume/").status_code == 403
    assert api_client(world.outsider).post(f"/api/v1/jobs/{suspended.uid}/idle-resume/").status_code == 404
    assert member.post(f"/api/v1/jobs/{suspended.uid}/idle-resume/").json()["idle"]["suspended_at"] is None


def test_the_usage_page_and_api_total_the_projects_reclaimed_hours(world: World) -> None:
    _job(world, state=JobState.PREEMPTED, idle_suspended_at=timezone.now() - timedelta(minutes=30))
    _job(world, state=JobState.SUCCEEDED, idle_reclaimed_gpu_hours=1.25)
    _job(world, state=JobState.RUNNING, idle_warned_at=timezone.now())
    page = session_client(world.member).get("/jobs/projects/alpha/usage/").content.decode()
    assert "<strong>1.75</strong> GPU-hours given back" in page
    assert "1 job warned now, 1 suspended" in page
    QueueSettings.objects.update_or_create(pk=1, defaults={"idle_interactive_window_s": 0})
    body = api_client(world.member).get("/api/v1/projects/alpha/idle-reclaim/").json()
    assert body.pop("policy") == {
        "enabled": True,
        "util_pct": 5,
        "mem_change_pct": 5,
        "window_s": 1800,
        "interactive_window_s": 0,
        "warning_s": 600,
        "max_snoozes": 2,
    }
    assert body == {
        "project": "alpha",
        "reclaimed_gpu_hours": pytest.approx(1.75, abs=0.01),
        "warned_jobs": 1,
        "suspended_jobs": 1,
    }
    assert api_client(world.outsider).get("/api/v1/projects/alpha/idle-reclaim/").status_code == 404
