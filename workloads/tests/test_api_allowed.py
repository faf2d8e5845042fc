"""GET /api/v1/projects/<slug>/allowed/: the images and volumes a job of the project may use."""

from __future__ import annotations

import pytest

from tests.fixtures.personas import World, api_client
from workloads.models import ImageRule, ProjectVolume

pytestmark = pytest.mark.django_db


def test_a_member_reads_the_images_and_volumes_of_the_project(jobs_world: World) -> None:
    ImageRule.objects.create(project=jobs_world.alpha, registry="docker.io", repository="library/python")
    ProjectVolume.objects.create(project=jobs_world.alpha, name="ro-sets", claim_name="c", read_only=True)
    response = api_client(jobs_world.viewer).get("/api/v1/projects/alpha/allowed/")
    assert response.status_code == 200
    assert response.json() == {
        "images": ["docker.io/library/python", "registry.example.com/team/train"],
        "volumes": [{"name": "data", "read_only": False}, {"name": "ro-sets", "read_only": True}],
    }


def test_another_projects_list_is_not_found(jobs_world: World) -> None:
    response = api_client(jobs_world.member).get("/api/v1/projects/beta/allowed/")
    assert response.status_code == 404
    assert "registry.example.com" not in response.content.decode()
