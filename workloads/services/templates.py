"""Writes for job templates: a saved, typed spec of a project, and jobs submitted from one.

A template's spec is parsed with the project's limits when it is saved, and again (with the
overrides on top) when a job is submitted from it, so a template saved before an operator
narrowed the limits cannot get around them.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest

from accounts.audit import audit_record, snapshot
from accounts.models import Project, User
from workloads.models import Job, JobTemplate
from workloads.services.jobs import job_spec_request, job_submit, require_submitter, spec_limits
from workloads.spec import parse_spec, spec_request


def template_spec(*, project: Project, spec: Any) -> dict[str, Any]:
    """A template's spec as the submit form would take it: parsed with the project's limits."""
    return spec_request(parse_spec(spec, spec_limits(project=project)))


def _clean_name(name: Any, description: Any) -> tuple[str, str]:
    if not isinstance(name, str) or not name.strip():
        raise ValidationError({"name": ["Give the template a name."]})
    if not isinstance(description, str):
        raise ValidationError({"description": ["The description is text."]})
    return name.strip(), description


def template_create(
    *,
    actor: User,
    project: Project,
    name: Any,
    spec: Any,
    description: Any = "",
    request: HttpRequest | None = None,
) -> JobTemplate:
    name, description = _clean_name(name, description)
    template = JobTemplate(project=project, name=name, description=description, spec=spec)
    return template_add(actor=actor, template=template, request=request)


def template_from_job(
    *, actor: User, job: Job, name: Any, description: Any = "", request: HttpRequest | None = None
) -> JobTemplate:
    """Save a job's request (what a rerun would submit) as a template of its project."""
    return template_create(
        actor=actor,
        project=job.project,
        name=name,
        spec=job_spec_request(job),
        description=description,
        request=request,
    )


def _require_unique(template: JobTemplate) -> None:
    clash = JobTemplate.objects.filter(project=template.project, name=template.name)
    if template.pk:
        clash = clash.exclude(pk=template.pk)
    if clash.exists():
        raise ValidationError({"name": ["This project already has a template of that name."]})


def template_add(*, actor: User, template: JobTemplate, request: HttpRequest | None = None) -> JobTemplate:
    """Save a new template (from the API, the pages or the admin) with its spec parsed and audited."""
    project = template.project
    require_submitter(actor=actor, project=project)
    template.spec, template.created_by = template_spec(project=project, spec=template.spec), actor
    return _save(actor=actor, template=template, action="template.create", before=None, request=request)


def _save(
    *,
    actor: User,
    template: JobTemplate,
    action: str,
    before: dict[str, Any] | None,
    request: HttpRequest | None,
) -> JobTemplate:
    """Check, save and audit in one transaction; nothing is written when a check fails."""
    _require_unique(template)
    template.full_clean()
    with transaction.atomic():
        template.save()
        audit_record(
            actor=actor,
            action=action,
            obj=template,
            project=template.project,
            before=before,
            after=snapshot(template),
            request=request,
        )
    return template


def template_update(
    *,
    actor: User,
    template: JobTemplate,
    name: Any = None,
    description: Any = None,
    spec: Any = None,
    request: HttpRequest | None = None,
) -> JobTemplate:
    """Change a template's name, description or spec (None keeps it); the spec replaces the old one whole."""
    project = template.project
    require_submitter(actor=actor, project=project)
    before = snapshot(template)
    new_name, new_description = _clean_name(
        template.name if name is None else name,
        template.description if description is None else description,
    )
    template.name, template.description = new_name, new_description
    if spec is not None:
        template.spec = template_spec(project=project, spec=spec)
    return _save(actor=actor, template=template, action="template.update", before=before, request=request)


def template_submit(
    *, actor: User, template: JobTemplate, overrides: Any = None, request: HttpRequest | None = None
) -> Job:
    """A job from a template's spec with an optional partial spec of overrides on top."""
    if overrides is not None and not isinstance(overrides, dict):
        raise ValidationError({"non_field_errors": ["Overrides must be a JSON object of spec fields."]})
    data = {**template.spec, **(overrides or {})}
    return job_submit(actor=actor, project=template.project, data=data, request=request)


def template_delete(*, actor: User, template: JobTemplate, request: HttpRequest | None = None) -> None:
    require_submitter(actor=actor, project=template.project)
    with transaction.atomic():
        audit_record(
            actor=actor,
            action="template.delete",
            obj=template,
            project=template.project,
            before=snapshot(template),
            request=request,
        )
        template.delete()
