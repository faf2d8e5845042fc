"""The API is the one its OpenAPI schema describes: errors on every operation, limits, JSON-only
bodies, filters only where they filter, and real responses that validate against the schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.core.cache import cache
from django.core.management import call_command
from drf_spectacular.generators import SchemaGenerator

from tests.fixtures.personas import World, api_client
from workloads import app_settings
from workloads.models import JobEvent
from workloads.services import jobs as job_services
from workloads.services import templates as template_services
from workloads.tests.conftest import IMAGE, allow_images

ERROR_CODES = {"400", "401", "403", "404", "405", "429"}
BODY_METHODS = {"post", "put", "patch"}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    generated: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    plain: dict[str, Any] = json.loads(json.dumps(generated, default=str))  # JSON types, as a client reads it
    return plain


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, path, op) for path, methods in schema["paths"].items() for m, op in methods.items()]


def test_the_schema_is_valid_openapi_and_generates_without_warnings(tmp_path: Path) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/v1/templates/{id}/submit/" in (tmp_path / "schema.yaml").read_text(encoding="utf-8")


def test_every_operation_documents_the_error_body(schema: dict[str, Any]) -> None:
    undocumented = []
    for method, path, op in operations(schema):
        missing = ERROR_CODES - set(op["responses"])
        if op.get("requestBody"):
            missing |= {"413", "415"} - set(op["responses"])
        if missing:
            undocumented.append(f"{method.upper()} {path}: {sorted(missing)}")
        for code in ERROR_CODES & set(op["responses"]):
            response = op["responses"][code]
            assert response["description"], (method, path, code)
            assert "application/json" in response.get("content", {}), (method, path, code)
    assert not undocumented, undocumented
    error = schema["components"]["schemas"]["ErrorDetail"]
    assert set(error["required"]) == {"status", "code", "message", "fields"}


def test_bodies_are_json_only(schema: dict[str, Any]) -> None:
    others = {
        f"{method.upper()} {path}": sorted(set(op["requestBody"]["content"]) - {"application/json"})
        for method, path, op in operations(schema)
        if op.get("requestBody")
    }
    assert not {k: v for k, v in others.items() if v}, others
    assert "POST /api/v1/jobs/" in others  # the check saw the bodies at all


def test_the_spec_limits_are_in_the_schema(schema: dict[str, Any]) -> None:
    spec = schema["components"]["schemas"]["SpecRequest"]["properties"]
    assert (spec["gpus"]["minimum"], spec["gpus"]["maximum"]) == (0, app_settings.max_gpus_per_job())
    floors = {"mps_slices": 0, "cpu_millicores": 100, "memory_mib": 64, "max_runtime_minutes": 1}
    for name, floor in floors.items():
        assert spec[name]["minimum"] == floor, name
        assert "maximum" in spec[name], name
        assert "quota" in spec[name]["description"], name  # the project's quota is the real maximum
    assert "allow-list" in spec["image"]["description"]
    assert spec["env"]["maxItems"] == 64
    assert spec["volumes"]["maxItems"] == 16
    create = schema["components"]["schemas"]["JobCreateRequest"]
    assert set(create["required"]) == {"project", "image"}


def test_job_actions_do_not_document_the_list_filters(schema: dict[str, Any]) -> None:
    def names(path: str, method: str) -> set[str]:
        return {p["name"] for p in schema["paths"][path][method].get("parameters", [])}

    assert {"state", "project"} <= names("/api/v1/jobs/", "get")
    for path, method in [
        ("/api/v1/jobs/{id}/", "get"),
        ("/api/v1/jobs/{id}/cancel/", "post"),
        ("/api/v1/jobs/{id}/rerun/", "post"),
        ("/api/v1/jobs/{id}/logs/", "get"),
        ("/api/v1/jobs/{id}/events/", "get"),
        ("/api/v1/jobs/{id}/template/", "post"),
    ]:
        assert not {"state", "project"} & names(path, method), path


@pytest.mark.django_db
@pytest.mark.parametrize(
    "content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"]
)
def test_a_body_that_is_not_json_is_a_415_saying_to_send_json(world: World, content_type: str) -> None:
    allow_images(world.alpha)
    body = f"project=alpha&image={IMAGE}"
    response = api_client(world.member).post("/api/v1/jobs/", body, content_type=content_type)
    assert response.status_code == 415
    error = response.json()["error"]
    assert "Content-Type: application/json" in error["message"]
    assert content_type.split(";")[0] in error["message"]


def _nullable(node: Any) -> Any:
    """OpenAPI 3.0 `nullable` in JSON Schema terms, so jsonschema can check a real response."""
    if isinstance(node, list):
        return [_nullable(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _nullable(v) for k, v in node.items()}
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


def validate(schema: dict[str, Any], path: str, method: str, status: int, body: Any) -> None:
    content = schema["paths"][path][method]["responses"][str(status)]["content"]["application/json"]
    document = _nullable({**content["schema"], "components": schema["components"]})
    jsonschema.validate(body, document)


@pytest.mark.django_db
def test_responses_validate_against_the_schema(world: World, schema: dict[str, Any]) -> None:
    cache.clear()
    allow_images(world.alpha)
    client = api_client(world.member)
    created = client.post("/api/v1/jobs/", {"project": "alpha", "image": IMAGE, "gpus": 1}, format="json")
    validate(schema, "/api/v1/jobs/", "post", 201, created.json())
    job = job_services.job_submit(actor=world.member, project=world.alpha, data={"image": IMAGE})
    JobEvent.objects.create(job=job, kind="k8s", message="pulled")
    template_services.template_create(
        actor=world.member, project=world.alpha, name="t", spec={"image": IMAGE}
    )
    checks = [
        ("/api/v1/jobs/", "/api/v1/jobs/"),
        ("/api/v1/jobs/{id}/events/", f"/api/v1/jobs/{job.uid}/events/"),
        ("/api/v1/templates/", "/api/v1/templates/"),
        ("/api/v1/usage/", "/api/v1/usage/?group=user"),
        ("/api/v1/usage/", "/api/v1/usage/?group=project&page_size=1"),
    ]
    for path, url in checks:
        response = client.get(url)
        assert response.status_code == 200, (url, response.content[:300])
        validate(schema, path, "get", 200, response.json())
    refused = client.post("/api/v1/jobs/", {"project": "alpha", "image": IMAGE, "gpus": -1}, format="json")
    validate(schema, "/api/v1/jobs/", "post", 400, refused.json())


@pytest.mark.django_db
def test_usage_comes_in_pages_with_one_key_per_row(world: World) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from workloads.models import Job

    start = timezone.now() - timedelta(days=3)
    Job.objects.create(
        project=world.alpha,
        owner=world.member,
        image=IMAGE,
        state="succeeded",
        gpus=1,
        started_at=start,
        finished_at=timezone.now(),
    )
    client = api_client(world.member)
    first = client.get("/api/v1/usage/?group=project&page_size=2").json()
    assert first["count"] == 4  # four UTC days touched by a three-day run
    for row in first["results"]:  # the schema's row: a `key`, not a `project` or `user` column
        assert {"day", "key", "gpu_hours"} <= set(row), row
        assert not {"project", "user"} & set(row), row
    assert first["results"][0]["key"] == "alpha"
    rest = client.get(first["next"]).json()
    assert len(rest["results"]) == 2
    assert client.get("/api/v1/usage/?export=xml").status_code == 400
    csv = client.get("/api/v1/usage/?group=user&export=csv").content.decode().splitlines()
    assert csv[0].startswith("day,user,gpu_hours")
    assert len(csv) == 5  # the CSV has every row, no pages
