"""REST API for jobs: /api/v1/jobs/ (templates are in workloads.api.templates).

Views stay thin: they resolve the project through accounts.selectors (a foreign project is 404,
or a field error on create), pass the raw body to the service (which validates the typed spec
strictly), and serialise the result. Write actions need the token scope `submit`.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api import request_user
from accounts.choices import TokenScope
from accounts.models import Project
from accounts.selectors import project_list
from workloads import accounting, logs, selectors
from workloads.api.idle import IdleExemptSerializer
from workloads.api.serializers import (
    JobCreateSerializer,
    JobEventSerializer,
    JobSerializer,
    SpecSerializer,
    TemplateFromJobSerializer,
    TemplateSerializer,
)
from workloads.choices import JobState
from workloads.models import Job
from workloads.services import idle_actions
from workloads.services import jobs as services
from workloads.services import templates as template_services


class TooManyLogStreams(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_log_streams"


class QueueFullError(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "queue_full"


def json_body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ValidationError({"non_field_errors": ["Send a JSON object."]})
    return dict(request.data)


def project_for_create(request: Request, body: dict[str, Any]) -> Project:
    slug = body.pop("project", None)
    project = (
        project_list(user=request_user(request)).filter(slug=slug).first() if isinstance(slug, str) else None
    )
    if project is None:
        raise ValidationError({"project": ["Choose one of your projects."]})
    return project


ANY_STATE = ["", *JobState.values]  # an empty ?state= filters nothing (a form's "any" choice)


# The filters belong to the list only: on the actions they would document parameters that do nothing.
@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("state", enum=ANY_STATE, description="only jobs in this state (empty: all)"),
            OpenApiParameter("project", str, description="only this project's jobs (a slug)"),
        ]
    )
)
class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Job]):
    serializer_class = JobSerializer
    queryset = Job.objects.none()  # for the schema; get_queryset scopes to the user's projects
    lookup_field = "uid"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    write_scope = TokenScope.SUBMIT

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return Job.objects.none()
        params = self.request.query_params
        state = params.get("state")
        if state and state not in JobState.values:
            raise ValidationError({"state": [f"One of {', '.join(JobState.values)}."]})
        return selectors.job_list(user=request_user(self.request), state=state, project=params.get("project"))

    def get_object(self) -> Job:
        return selectors.job_get(user=request_user(self.request), uid=self.kwargs["id"])

    @extend_schema(request=JobCreateSerializer, responses={201: JobSerializer})
    def create(self, request: Request) -> Response:
        body = json_body(request)
        project = project_for_create(request, body)
        try:
            job = services.job_submit(
                actor=request_user(request), project=project, data=body, request=request
            )
        except services.QueueFull as exc:
            raise QueueFullError(str(exc)) from exc
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, id: str) -> Response:
        job = services.job_cancel(actor=request_user(request), job=self.get_object(), request=request)
        return Response(JobSerializer(job).data)

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"], url_path="idle-snooze")
    def idle_snooze(self, request: Request, id: str) -> Response:
        """Snooze the idle warning: the idle window starts again (a bounded number of times)."""
        job = idle_actions.job_idle_snooze(
            actor=request_user(request), job=self.get_object(), request=request
        )
        return Response(JobSerializer(job).data)

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"], url_path="idle-resume")
    def idle_resume(self, request: Request, id: str) -> Response:
        """Put a job suspended for idle GPUs back in the queue (front of its priority)."""
        job = idle_actions.job_idle_resume(
            actor=request_user(request), job=self.get_object(), request=request
        )
        return Response(JobSerializer(job).data)

    @extend_schema(request=IdleExemptSerializer, responses={200: JobSerializer})
    @action(detail=True, methods=["post"], url_path="idle-exempt")
    def idle_exempt(self, request: Request, id: str) -> Response:
        """Managers: exempt the job from idle reclaim (`{"exempt": true}`) or take it back."""
        job = self.get_object()  # a foreign job is 404 whatever the body says
        body = IdleExemptSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        job = idle_actions.job_idle_exempt_set(
            actor=request_user(request),
            job=job,
            exempt=body.validated_data["exempt"],
            request=request,
        )
        return Response(JobSerializer(job).data)

    @extend_schema(request=SpecSerializer(partial=True), responses={201: JobSerializer})
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, id: str) -> Response:
        if request.data is None:  # a JSON `null` body: say so, rather than rerun with no edits
            raise ValidationError(
                {"non_field_errors": ["Send a JSON object of spec fields to change, or {}."]}
            )
        edits = request.data if request.data else None
        try:
            job = services.job_rerun(
                actor=request_user(request), job=self.get_object(), edits=edits, request=request
            )
        except services.QueueFull as exc:
            raise QueueFullError(str(exc)) from exc
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: JobEventSerializer(many=True)})
    @action(detail=True, methods=["get"], serializer_class=JobEventSerializer)
    def events(self, request: Request, id: str) -> Response:
        """The job's timeline, oldest first, in pages like every list."""
        events = selectors.job_events(job=self.get_object())
        page = self.paginate_queryset(events)  # type: ignore[arg-type]  # the viewset is typed for jobs
        return self.get_paginated_response(JobEventSerializer(page, many=True).data)

    @extend_schema(request=TemplateFromJobSerializer, responses={201: TemplateSerializer})
    @action(detail=True, methods=["post"])
    def template(self, request: Request, id: str) -> Response:
        """Save this job's request (what a rerun would submit) as a template of its project."""
        body = json_body(request)
        template = template_services.template_from_job(
            actor=request_user(request),
            job=self.get_object(),
            name=body.get("name"),
            description=body.get("description", ""),
            request=request,
        )
        return Response(TemplateSerializer(template).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[
            OpenApiParameter("follow", bool),
            OpenApiParameter(
                "worker",
                {"type": "integer", "minimum": 0},
                description="a job of several workers: this worker's log (404: the job has no such worker)",
            ),
        ],
        responses={(200, "text/plain"): str},
    )
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, id: str) -> StreamingHttpResponse:
        job = self.get_object()
        follow = request.query_params.get("follow") in ("1", "true", "yes")
        asgi = hasattr(request, "scope")
        try:
            worker = logs.worker_param(job, request.query_params.get("worker"))
        except ValueError as exc:
            raise ValidationError({"worker": [str(exc)]}) from exc
        except logs.NoSuchWorker as exc:
            raise exceptions.NotFound(str(exc)) from exc
        try:
            user = request_user(request).pk
            return logs.log_response(job, follow=follow, user_id=user, asgi=asgi, worker=worker)
        except logs.TooManyStreams as exc:
            raise TooManyLogStreams(str(exc)) from exc

    @extend_schema(
        parameters=[
            OpenApiParameter("group", enum=["job", "user", "project", "gpu_type"]),
            OpenApiParameter("project", str, description="only this project's jobs"),
            OpenApiParameter("state", enum=ANY_STATE, description="only jobs in this state (empty: all)"),
        ],
        responses={(200, "text/csv"): str},
    )
    @action(detail=False, methods=["get"], url_path="accounting")
    def accounting(self, request: Request) -> HttpResponse:
        """Allocated and used (busy) GPU-hours as CSV: per job, or rolled up per user, project or GPU
        type (?group=)."""
        params = request.query_params
        group = params.get("group", "job")
        if group not in ("job", "user", "project", "gpu_type"):
            raise ValidationError({"group": ["One of job, user, project, gpu_type."]})
        state = params.get("state") or None
        if state is not None and state not in JobState.values:
            raise ValidationError({"state": [f"One of {', '.join(JobState.values)}."]})
        rows = accounting.gpu_hours_rows(
            user=request_user(request), project=params.get("project") or None, state=state
        )
        if group != "job":
            rows = accounting.gpu_hours_rollup(rows, by=group)
        return accounting.csv_response(rows, f"gpu-hours-by-{group}.csv")
