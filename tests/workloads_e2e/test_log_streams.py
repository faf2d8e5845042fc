"""Followed logs through the real ASGI server (daphne) and the real cluster's pods/log.

A followed log must not hold a server thread: many open job pages would exhaust the thread pool
that static files (and every other streamed response) need, so the whole site would hang while
plain HTML still answered. These tests open the streams as browsers would and look at what the server still
does meanwhile, and after they close.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.test import Client

from accounts.choices import Role
from accounts.models import Membership, User
from tests.fixtures.personas import World, make_user
from tests.workloads_e2e.live_portal import drive_until
from tests.workloads_e2e.procs import wait_for
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import jobs as services
from workloads.tasks import reconcile_job
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = [pytest.mark.cluster, pytest.mark.django_db(transaction=True)]
STREAMS = 50
PER_USER_CAP = 8  # the default of GPUPORTAL_LOG_STREAMS_PER_USER


def _cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def _long_job(world: World) -> Job:
    allow_images(world.alpha)
    return services.job_submit(
        actor=world.member,
        project=world.alpha,
        data={"image": IMAGE, "cpu_millicores": 100, "memory_mib": 64, "simulate": {"run_seconds": 600}},
    )


@contextmanager
def _follow(base: str, job: Job, cookie: str) -> Iterator[http.client.HTTPResponse]:
    """An open followed-log response; leaving the block closes the connection like a closed tab."""
    url = urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
    conn.request("GET", f"/api/v1/jobs/{job.uid}/logs/?follow=1", headers={"Cookie": cookie})
    try:
        yield conn.getresponse()
    finally:
        conn.close()


def _get(base: str, path: str, cookie: str = "") -> int:
    request = urllib.request.Request(f"{base}{path}", headers={"Cookie": cookie})  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=15) as response:  # noqa: S310
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _members(world: World, count: int) -> list[User]:
    users = [make_user(f"follower{i}@example.com") for i in range(count)]
    for user in users:
        Membership.objects.create(project=world.alpha, user=user, role=Role.MEMBER)
    return users


def test_fifty_followed_logs_leave_static_files_and_pages_served(
    world: World, kube: object, portal_server: str
) -> None:
    job = _long_job(world)
    drive_until(job, JobState.RUNNING)
    cookies = [_cookie(user) for user in _members(world, -(-STREAMS // PER_USER_CAP))]
    with ExitStack() as stack:
        who = [cookies[i % len(cookies)] for i in range(STREAMS)]
        streams = [stack.enter_context(_follow(portal_server, job, cookie)) for cookie in who]
        with ThreadPoolExecutor(max_workers=10) as pool:
            first = list(pool.map(lambda response: response.readline(), streams))
        assert all(b"simulated container started" in line for line in first), first[:3]
        # While all fifty are open, the server still serves a static file and a page.
        assert _get(portal_server, "/static/workloads/logs.js") == 200
        assert _get(portal_server, "/jobs/", cookies[0]) == 200
    # Closed like browser tabs: the server lets go of them, so a full user may follow again.
    wait_for(lambda: _opens_a_stream(portal_server, job, cookies[0]), 30, "the closed streams released")
    assert _get(portal_server, "/static/workloads/live.js") == 200
    services.job_cancel(actor=world.owner, job=job)
    reconcile_job(job.pk)


def _opens_a_stream(base: str, job: Job, cookie: str) -> bool:
    with _follow(base, job, cookie) as response:
        return response.status == 200


def test_one_user_may_hold_only_so_many_streams(world: World, kube: object, portal_server: str) -> None:
    job = _long_job(world)
    drive_until(job, JobState.RUNNING)
    cookie = _cookie(world.member)
    with ExitStack() as stack:
        for _ in range(PER_USER_CAP):
            response = stack.enter_context(_follow(portal_server, job, cookie))
            assert response.status == 200
            response.readline()  # the stream has started: it counts
        with _follow(portal_server, job, cookie) as extra:
            body = json.loads(extra.read())
        assert extra.status == 429
        assert "close a job page" in body["error"]["message"]
        with _follow(portal_server, job, _cookie(world.owner)) as other:
            assert other.status == 200  # the cap is per user
    services.job_cancel(actor=world.owner, job=job)
    reconcile_job(job.pk)


def test_a_queued_jobs_followed_log_waits_for_the_pod_and_keeps_blank_lines(
    world: World, kube: object, portal_server: str
) -> None:
    job = _long_job(world)
    with _follow(portal_server, job, _cookie(world.member)) as response, ThreadPoolExecutor(1) as pool:
        assert b"waiting for the job to start" in response.readline()
        reading = pool.submit(lambda: [response.readline() for _ in range(4)])
        drive_until(job, JobState.RUNNING)
        lines = reading.result(timeout=60)
    text = b"".join(lines).decode()
    assert "simulated container started" in text
    assert "step 1/3 done\n\n" in text, text  # the sample log's empty line reaches the reader
    services.job_cancel(actor=world.owner, job=job)
    reconcile_job(job.pk)
