"""Every field of JobSpec walks through everything derived from its declaration: the API schema, the
submit form, the parser, the request a rerun or template copies, the Job row and the Kubernetes Job.

A field added to the declaration (or renamed there, or dropped from one derivation) fails here until
each of them carries it, or until the declaration marks it as outside one: a field for the site's
tests and demo only is not in the public schema, a field the form does not edit is not in the form,
and a field no manifest reads says why (and the walk checks that the manifest indeed ignores it).
"""

from __future__ import annotations

import uuid
from typing import Any, get_args

import pytest
from django.core.exceptions import ValidationError
from drf_spectacular.generators import SchemaGenerator

from workloads.app_settings import SiteSwitch
from workloads.forms import SubmitForm, spec_initial
from workloads.k8s import builders
from workloads.models import Job, ProjectVolume
from workloads.spec import JobSpec, SpecLimits, parse_spec, spec_request
from workloads.spec.fields import SPEC_FIELDS, SpecField, fields_of
from workloads.spec.limits import site_maximum

IMAGE = "registry.example.com/team/train:1.0"
LIMITS = SpecLimits(
    images=frozenset({("registry.example.com", "team/train")}),
    volumes={"data": False},
    maxima={f.name: site_maximum(f) or 0 for f in SPEC_FIELDS if f.hints.quota},
    simulation=True,
    real_node=True,
)
IDS = builders.JobIdentity(
    uid=uuid.UUID(int=1), name="job-1", namespace="gp-alpha", project="alpha", posix_id=100_007
)
EVERY_SWITCH: frozenset[SiteSwitch] = frozenset(get_args(SiteSwitch))
CLAIMS = {"data": ProjectVolume(name="data", claim_name="alpha-data")}
# Fields whose example shows in the manifest only beside another field's value.
COMPANIONS: dict[str, dict[str, Any]] = {"gpu_type": {"gpus": 1}}


@pytest.fixture(scope="module")
def schema_fields() -> dict[str, Any]:
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    properties: dict[str, Any] = schema["components"]["schemas"]["SpecRequest"]["properties"]
    return properties


def _requests(field: SpecField) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request without the field, and the same one with the field's declared example."""
    assert field.examples, f"{field.name}: declare an example (Meta examples), a value other than the default"
    base = {"image": IMAGE, **COMPANIONS.get(field.name, {})}
    return base, {**base, field.name: field.examples[0]}


def _through_the_form(request: dict[str, Any]) -> dict[str, Any]:
    """The request as the form shows it (a rerun or a template), posted back unchanged."""
    options: dict[str, Any] = {
        "projects": [("alpha", "Alpha")],
        "switches": EVERY_SWITCH,
        "volumes": {"alpha": {"data": False}},
    }
    shown = SubmitForm(initial={**spec_initial(request), "project": "alpha"}, **options)
    # What a browser posts: every filled-in input, no unticked box.
    posted = {b.html_name: b.value() for b in shown if b.value() is not None and b.value() is not False}
    form = SubmitForm(posted, **options)
    assert form.is_valid(), form.errors
    return form.spec()


def _form_names(field: SpecField) -> set[str]:
    if field.hints.form == "fields" and field.struct is not None:
        return {field.hints.form_prefix + sub.name for sub in fields_of(field.struct)}
    if field.hints.form == "rows" and field.struct is not None:
        return {f"{sub.name}_0" for sub in fields_of(field.struct)}
    return {field.name}


@pytest.mark.parametrize("field", SPEC_FIELDS, ids=[f.name for f in SPEC_FIELDS])
def test_each_field_reaches_the_schema_the_form_the_parser_the_row_and_the_manifest(
    field: SpecField, schema_fields: dict[str, Any]
) -> None:
    name = field.name
    base, request = _requests(field)

    # The API schema: every field but the site's tests-and-demo ones, with the parser's bounds.
    if field.hints.tests_and_demo:
        assert name not in schema_fields, f"{name} is for tests and the demo: keep it out of the schema"
    else:
        assert name in schema_fields, f"{name} is missing from the API schema"
        if field.lowest is not None:
            bounds = (schema_fields[name]["minimum"], schema_fields[name]["maximum"])
            assert bounds == (field.lowest, site_maximum(field)), name

    # The parser: the example is taken as it is, and differs from the default.
    spec, without = parse_spec(request, LIMITS), parse_spec(base, LIMITS)
    assert getattr(spec, name) != getattr(without, name), f"{name}: the parser ignores it"
    assert spec_request(spec)[name] == field.examples[0], f"{name}: the parser changed the example"

    # What a rerun or a template copies, and the Job row: both give the same spec back.
    assert parse_spec(spec_request(spec), LIMITS) == spec, f"{name} is lost by the request shape"
    if field.hints.tests_and_demo:
        assert name not in spec_request(without), f"{name} is for tests and the demo: left out while unset"
    assert Job(**Job.spec_columns(spec)).job_spec() == spec, f"{name} is lost by the Job row"

    # The form: shown from the stored request, posted back, the same value (unless it is not a form field).
    shown = SubmitForm(projects=[], switches=EVERY_SWITCH).fields
    if field.hints.form == "none":
        assert not _form_names(field) & set(shown), f"{name} is marked as not in the form"
    else:
        assert _form_names(field) <= set(shown), f"{name} is missing from the form"
        posted = parse_spec(_through_the_form(spec_request(spec)), LIMITS)
        assert getattr(posted, name) == getattr(spec, name), f"{name} is lost by the form"

    # The Kubernetes Job: it changes with the field, unless the declaration says no manifest reads it.
    manifest = builders.build_job(spec, IDS, claims=CLAIMS, simulation=True)
    plain = builders.build_job(without, IDS, claims=CLAIMS, simulation=True)
    if field.hints.no_manifest:
        assert manifest == plain, f"{name} is marked as read by no manifest, yet changes it"
    else:
        assert manifest != plain, f"{name} does not reach the manifest (or mark it: Hints.no_manifest)"


def test_every_field_at_fault_is_named_at_once() -> None:
    """msgspec stops at a Struct's first error; the parser names each field at fault."""
    wrong = {field.name: 0.5 for field in SPEC_FIELDS}
    with pytest.raises(ValidationError) as info:
        parse_spec(wrong, LIMITS)
    assert set(info.value.message_dict) == {field.name for field in SPEC_FIELDS}


def test_the_job_columns_default_to_the_declared_defaults() -> None:
    assert Job(image=IMAGE).job_spec() == JobSpec(image=IMAGE)
