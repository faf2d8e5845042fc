"""The API answers in its own error body whatever went wrong: a wrong path, a huge body, a null body,
a junk page size."""

from __future__ import annotations

import json

import pytest

from tests.fixtures.personas import World, api_client
from workloads.services import jobs as services
from workloads.tests.conftest import IMAGE, allow_images

pytestmark = pytest.mark.django_db


def _error(response: object) -> dict[str, object]:
    body = json.loads(response.content)  # type: ignore[attr-defined]
    error: dict[str, object] = body["error"]
    return error


def test_a_path_that_matches_no_route_answers_the_json_error(world: World) -> None:
    response = api_client(world.member).get("/api/v1/no-such-thing/")
    assert (response.status_code, response["Content-Type"]) == (404, "application/json")
    assert "/api/docs/" in str(_error(response)["message"])


def test_a_body_over_the_limit_is_a_413_in_the_error_body(world: World) -> None:
    huge = json.dumps({"project": "alpha", "image": IMAGE, "command": ["x" * (3 * 1024 * 1024)]})
    response = api_client(world.member).post("/api/v1/jobs/", huge, content_type="application/json")
    assert response.status_code == 413
    assert "2.5 MB" in str(_error(response)["message"])


def test_rerun_with_a_null_body_is_refused(world: World) -> None:
    allow_images(world.alpha)
    job = services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE, "gpus": 1})
    response = api_client(world.member).post(
        f"/api/v1/jobs/{job.uid}/rerun/", "null", content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON object" in str(_error(response)["message"])


@pytest.mark.parametrize("size", ["abc", "0", "-5", "201"])
def test_a_junk_page_size_is_a_400_that_names_it(world: World, size: str) -> None:
    response = api_client(world.member).get(f"/api/v1/jobs/?page_size={size}")
    assert response.status_code == 400
    assert "page_size" in _error(response)["fields"]  # type: ignore[operator]
