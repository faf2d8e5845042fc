"""Where people land and what they see when they may not do something."""

from __future__ import annotations

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
