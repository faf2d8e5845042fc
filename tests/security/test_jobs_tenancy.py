"""Cross-tenant and bad-input checks for the jobs and templates routes, pages and websocket.

`register_job_probes()` adds the jobs routes to the cross-tenant matrix (tests/security/probes.py); the
tests below also run on their own: a foreign job is 404 everywhere, lists hold no foreign rows,
and the live socket never carries another project's job.
"""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator

from accounts.models import User
from tests.fixtures.personas import World, api_client, session_client
from workloads.models import Job, JobTemplate
from workloads.services import jobs as services
from workloads.services import templates as template_services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = pytest.mark.django_db


def _victim_setup(victim: Any) -> None:
    allow_images(victim.project)
    job = services.job_submit(
        actor=victim.manager, project=victim.project, data={"image": IMAGE, "name": "victim-job"}
    )
    template = template_services.template_create(
        actor=victim.manager, project=victim.project, name="victim-template", spec={"image": IMAGE}
    )
    victim.extra.update(job=job, template=template, markers=[str(job.uid), "victim-job", "victim-template"])


def register_job_probes() -> None:
    from tests.security.probes import PROBES, VICTIM_SETUP, WS_PROBES, Probe

    def job_url(v: Any, tail: str = "") -> str:
        return f"/api/v1/jobs/{v.extra['job'].uid}/{tail}"

    def tpl_url(v: Any) -> str:
        return f"/api/v1/templates/{v.extra['template'].pk}/"

    spec = {"image": IMAGE, "gpus": 1}
    PROBES.update(
        {
            "GET /api/v1/jobs/": lambda v: [
                Probe("GET", f"/api/v1/jobs/?project={v.project.slug}", "no_foreign_rows"),
                Probe("GET", "/api/v1/jobs/", "no_foreign_rows"),
            ],
            "POST /api/v1/jobs/": lambda v: [
                Probe("POST", "/api/v1/jobs/", "denied", {"project": v.project.slug, **spec})
            ],
            "GET /api/v1/jobs/{id}/": lambda v: [Probe("GET", job_url(v), "not_found")],
            "POST /api/v1/jobs/{id}/cancel/": lambda v: [Probe("POST", job_url(v, "cancel/"), "not_found")],
            "POST /api/v1/jobs/{id}/idle-snooze/": lambda v: [
                Probe("POST", job_url(v, "idle-snooze/"), "not_found")
            ],
            "POST /api/v1/jobs/{id}/idle-resume/": lambda v: [
                Probe("POST", job_url(v, "idle-resume/"), "not_found")
            ],
            "POST /api/v1/jobs/{id}/idle-exempt/": lambda v: [
                Probe("POST", job_url(v, "idle-exempt/"), "not_found", {"exempt": True})
            ],
            "POST /api/v1/jobs/{id}/rerun/": lambda v: [
                Probe("POST", job_url(v, "rerun/"), "not_found", {"gpus": 1})
            ],
            "GET /api/v1/jobs/{id}/events/": lambda v: [Probe("GET", job_url(v, "events/"), "not_found")],
            "GET /api/v1/jobs/{id}/logs/": lambda v: [
                Probe("GET", job_url(v, "logs/?follow=1"), "not_found")
            ],
            "GET /api/v1/jobs/accounting/": lambda v: [
                Probe("GET", "/api/v1/jobs/accounting/", "no_foreign_rows"),
                Probe("GET", f"/api/v1/jobs/accounting/?project={v.project.slug}", "no_foreign_rows"),
                Probe("GET", "/api/v1/jobs/accounting/?group=project", "no_foreign_rows"),
                Probe("GET", "/api/v1/jobs/accounting/?group=user", "no_foreign_rows"),
            ],
            "GET /api/v1/templates/": lambda v: [Probe("GET", "/api/v1/templates/", "no_foreign_rows")],
            "POST /api/v1/templates/": lambda v: [
                Probe(
                    "POST",
                    "/api/v1/templates/",
                    "denied",
                    {"project": v.project.slug, "name": "x", "spec": spec},
                )
            ],
            "GET /api/v1/templates/{id}/": lambda v: [Probe("GET", tpl_url(v), "not_found")],
            "DELETE /api/v1/templates/{id}/": lambda v: [Probe("DELETE", tpl_url(v), "not_found")],
            "PUT /api/v1/templates/{id}/": lambda v: [
                Probe("PUT", tpl_url(v), "not_found", {"name": "stolen", "spec": spec})
            ],
            "PATCH /api/v1/templates/{id}/": lambda v: [
                Probe("PATCH", tpl_url(v), "not_found", {"description": "stolen"})
            ],
            "POST /api/v1/templates/{id}/submit/": lambda v: [
                Probe("POST", f"{tpl_url(v)}submit/", "not_found", {"gpus": 1})
            ],
            "GET /api/v1/projects/{project_slug}/idle-reclaim/": lambda v: [
                Probe("GET", f"/api/v1/projects/{v.project.slug}/idle-reclaim/", "not_found")
            ],
            "GET /api/v1/projects/{project_slug}/allowed/": lambda v: [
                Probe("GET", f"/api/v1/projects/{v.project.slug}/allowed/", "not_found")
            ],
            "POST /api/v1/jobs/{id}/template/": lambda v: [
                Probe("POST", job_url(v, "template/"), "not_found", {"name": "stolen"})
            ],
        }
    )
    if _victim_setup not in VICTIM_SETUP:
        VICTIM_SETUP.append(_victim_setup)
    WS_PROBES["ws/jobs/"] = lambda v: "/ws/jobs/"


@pytest.fixture
def jobs_world(world: World) -> World:
    allow_images(world.alpha)
    allow_images(world.beta)
    return world


@pytest.fixture
def victim_job(jobs_world: World) -> Job:
    return services.job_submit(
        actor=jobs_world.owner, project=jobs_world.alpha, data={"image": IMAGE, "name": "secret"}
    )


JOB_ROUTES = [
    ("get", ""),
    ("post", "cancel/"),
    ("post", "rerun/"),
    ("post", "idle-snooze/"),
    ("post", "idle-resume/"),
    ("post", "idle-exempt/"),
    ("get", "events/"),
    ("get", "logs/?follow=1"),
]


@pytest.mark.parametrize(("method", "tail"), JOB_ROUTES)
@pytest.mark.parametrize("auth", ["token", "session"])
def test_foreign_job_is_404_on_every_route(
    jobs_world: World, victim_job: Job, method: str, tail: str, auth: str
) -> None:
    from tests.fixtures.personas import api_session_client

    client = api_client(jobs_world.outsider) if auth == "token" else api_session_client(jobs_world.outsider)
    response = getattr(client, method)(f"/api/v1/jobs/{victim_job.uid}/{tail}")
    assert response.status_code == 404
    victim_job.refresh_from_db()
    assert victim_job.state == "queued"
    assert Job.objects.count() == 1


def test_lists_hold_no_foreign_rows(jobs_world: World, victim_job: Job) -> None:
    client = api_client(jobs_world.outsider)
    assert client.get("/api/v1/jobs/").json()["count"] == 0
    assert client.get("/api/v1/jobs/?project=alpha").json()["count"] == 0
    assert str(victim_job.uid) not in client.get("/api/v1/jobs/accounting/").content.decode()


def test_submit_into_a_foreign_project_is_a_field_error(jobs_world: World) -> None:
    response = api_client(jobs_world.outsider).post(
        "/api/v1/jobs/", {"project": "alpha", "image": IMAGE}, format="json"
    )
    assert response.status_code == 400
    assert "project" in response.json()["error"]["fields"]
    assert Job.objects.count() == 0


def test_foreign_template_is_404(jobs_world: World) -> None:
    template = template_services.template_create(
        actor=jobs_world.owner, project=jobs_world.alpha, name="t", spec={"image": IMAGE}
    )
    client = api_client(jobs_world.outsider)
    assert client.get(f"/api/v1/templates/{template.pk}/").status_code == 404
    assert client.delete(f"/api/v1/templates/{template.pk}/").status_code == 404
    assert client.get("/api/v1/templates/not-a-number/").status_code == 404
    assert JobTemplate.objects.filter(pk=template.pk).exists()


@pytest.mark.parametrize("path", ["", "cancel/", "rerun/", "rerun/rightsized/"])
def test_foreign_job_pages_are_404(jobs_world: World, victim_job: Job, path: str) -> None:
    client = session_client(jobs_world.outsider)
    method = client.get if not path else client.post
    assert method(f"/jobs/{victim_job.uid}/{path}").status_code == 404


def test_malformed_ids_are_404(jobs_world: World) -> None:
    client = api_client(jobs_world.member)
    assert client.get("/api/v1/jobs/00000000-0000-0000-0000-00000000000z/").status_code == 404
    assert client.get("/api/v1/jobs/12345678-1234-5678-1234-567812345678/").status_code == 404


async def _socket_for(user: User | None, path: str = "/ws/jobs/") -> WebsocketCommunicator:
    from channels.auth import AuthMiddlewareStack
    from channels.routing import URLRouter
    from django.contrib.auth.models import AnonymousUser

    from workloads.routing import websocket_urlpatterns

    class _Inject:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
            return await self.app({**scope, "user": user or AnonymousUser()}, receive, send)

    _ = AuthMiddlewareStack
    return WebsocketCommunicator(_Inject(URLRouter(websocket_urlpatterns)), path)


@pytest.mark.django_db(transaction=True)
async def test_socket_carries_only_own_projects(jobs_world: World) -> None:
    from asgiref.sync import sync_to_async

    from workloads.services.broadcast import job_changed

    owner_socket, outsider_socket = (
        await _socket_for(jobs_world.owner),
        await _socket_for(jobs_world.outsider),
    )
    assert (await owner_socket.connect())[0]
    assert (await outsider_socket.connect())[0]
    job = await sync_to_async(services.job_submit)(
        actor=jobs_world.owner, project=jobs_world.alpha, data={"image": IMAGE}
    )
    await sync_to_async(job_changed)(job.pk)
    message = await owner_socket.receive_json_from(timeout=5)
    assert (message["job"], message["state"]) == (str(job.uid), "queued")
    assert await outsider_socket.receive_nothing(timeout=1)
    await owner_socket.disconnect()
    await outsider_socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_batch_of_changes_reaches_each_project_only(jobs_world: World) -> None:
    """An admission cycle announces all its changed jobs in one trip (jobs_changed): each socket
    gets every change of its own projects, none of another's."""
    from asgiref.sync import sync_to_async

    from workloads.services.broadcast import jobs_changed

    alpha_socket, beta_socket = await _socket_for(jobs_world.owner), await _socket_for(jobs_world.outsider)
    assert (await alpha_socket.connect())[0]
    assert (await beta_socket.connect())[0]
    submit = sync_to_async(services.job_submit)
    data = {"image": IMAGE}
    alpha = [await submit(actor=jobs_world.owner, project=jobs_world.alpha, data=data) for _ in "ab"]
    beta = await submit(actor=jobs_world.outsider, project=jobs_world.beta, data=data)
    await sync_to_async(jobs_changed)([alpha[0].pk, beta.pk, alpha[1].pk])
    got = {(await alpha_socket.receive_json_from(timeout=5))["job"] for _ in alpha}
    assert got == {str(job.uid) for job in alpha}
    assert (await beta_socket.receive_json_from(timeout=5))["job"] == str(beta.uid)
    assert await alpha_socket.receive_nothing(timeout=1)
    assert await beta_socket.receive_nothing(timeout=1)
    await alpha_socket.disconnect()
    await beta_socket.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_anonymous_socket_is_refused(jobs_world: World) -> None:
    socket = await _socket_for(None)
    connected, _ = await socket.connect()
    assert not connected


@pytest.mark.django_db(transaction=True)
async def test_a_socket_sends_the_current_state_of_the_jobs_its_page_shows_first(jobs_world: World) -> None:
    """Only of jobs the user may see: another project's uid, a malformed one, get nothing."""
    from asgiref.sync import sync_to_async

    from workloads.models import Job as JobRow

    submit = sync_to_async(services.job_submit)
    mine = await submit(actor=jobs_world.owner, project=jobs_world.alpha, data={"image": IMAGE})
    theirs = await submit(actor=jobs_world.outsider, project=jobs_world.beta, data={"image": IMAGE})
    explanation = {"code": "quota", "sentence": "project quota 2/2 GPUs in use", "position_global": 3}
    # Changed after the page rendered, before its socket connected: no message announced it.
    await sync_to_async(JobRow.objects.filter(pk=mine.pk).update)(queue_explanation=explanation)
    socket = await _socket_for(jobs_world.owner, f"/ws/jobs/?jobs={mine.uid},{theirs.uid},nonsense")
    assert (await socket.connect())[0]
    message = await socket.receive_json_from(timeout=5)
    assert (message["job"], message["state"]) == (str(mine.uid), "queued")
    assert "project quota 2/2 GPUs in use" in message["queue"]["text"]
    assert await socket.receive_nothing(timeout=1)
    await socket.disconnect()
