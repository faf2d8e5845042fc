"""REST API for job templates: /api/v1/templates/ (list, get, create, PUT/PATCH, delete, submit).

Thin like workloads.api.jobs: the services in workloads.services.templates parse the spec with the
project's limits and audit every write; a foreign template is 404 on every route.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api import request_user
from accounts.choices import TokenScope
from workloads import selectors
from workloads.api.jobs import QueueFullError, json_body, project_for_create
from workloads.api.serializers import (
    JobSerializer,
    SpecSerializer,
    TemplateCreateSerializer,
    TemplateSerializer,
    TemplateWriteSerializer,
)
from workloads.models import JobTemplate
from workloads.services import jobs as job_services
from workloads.services import templates as services

REQUIRED = "This field is required; PATCH changes only the fields it sends."
UNKNOWN = "Unknown field; a template has a name, a description and a spec."
NULL = "May not be null; leave the field out to keep it."


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("project", str, description="only this project's templates (a slug)"),
            OpenApiParameter("name", str, description="only the template of this exact name"),
        ]
    )
)
class TemplateViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[JobTemplate],
):
    serializer_class = TemplateSerializer
    queryset = JobTemplate.objects.none()
    write_scope = TokenScope.SUBMIT

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return JobTemplate.objects.none()
        params = self.request.query_params
        templates = selectors.template_list(user=request_user(self.request), project=params.get("project"))
        name = params.get("name")
        return templates.filter(name=name) if name else templates

    def get_object(self) -> JobTemplate:
        pk = str(self.kwargs["pk"])
        if not pk.isdigit():
            raise Http404("No such template.")
        return selectors.template_get(user=request_user(self.request), pk=int(pk))

    @extend_schema(request=TemplateCreateSerializer, responses={201: TemplateSerializer})
    def create(self, request: Request) -> Response:
        body = json_body(request)
        project = project_for_create(request, body)
        template = services.template_create(
            actor=request_user(request),
            project=project,
            name=body.get("name"),
            spec=body.get("spec"),
            description=body.get("description", ""),
            request=request,
        )
        return Response(TemplateSerializer(template).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=TemplateWriteSerializer, responses={200: TemplateSerializer})
    def update(self, request: Request, pk: str) -> Response:
        body = json_body(request)
        missing = {key: [REQUIRED] for key in ("name", "spec") if key not in body}
        if missing:  # PUT replaces the template: say what is missing rather than keep old values
            raise ValidationError(missing)
        return self._update(request, {**body, "description": body.get("description", "")})

    @extend_schema(request=TemplateWriteSerializer(partial=True), responses={200: TemplateSerializer})
    def partial_update(self, request: Request, pk: str) -> Response:
        return self._update(request, json_body(request))

    def _update(self, request: Request, body: dict[str, Any]) -> Response:
        unknown = {str(key)[:60]: [UNKNOWN] for key in sorted(set(body) - {"name", "description", "spec"})}
        nulls = {key: [NULL] for key, value in body.items() if value is None}  # None would mean "keep"
        if unknown or nulls:
            raise ValidationError({**unknown, **nulls})
        template = services.template_update(
            actor=request_user(request),
            template=self.get_object(),
            name=body.get("name"),
            description=body.get("description"),
            spec=body.get("spec"),
            request=request,
        )
        return Response(TemplateSerializer(template).data)

    @extend_schema(
        request=SpecSerializer(partial=True),
        responses={201: JobSerializer},
        description="A job from the template's spec; the body's spec fields override it ({} for none).",
    )
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str) -> Response:
        overrides = json_body(request)
        try:
            job = services.template_submit(
                actor=request_user(request),
                template=self.get_object(),
                overrides=overrides,
                request=request,
            )
        except job_services.QueueFull as exc:
            raise QueueFullError(str(exc)) from exc
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: JobTemplate) -> None:
        services.template_delete(actor=request_user(self.request), template=instance, request=self.request)
