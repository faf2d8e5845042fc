"""REST API for jobs and templates: /api/v1/jobs/ and /api/v1/templates/.

Views stay thin: they resolve the project through accounts.selectors (a foreign project is 404,
or a field error on create), pass the raw body to the service (which validates the typed spec
strictly), and serialise the result. Write actions need the token scope `submit`.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api import request_user
from accounts.choices import TokenScope
from accounts.models import Project
from accounts.selectors import project_list
from workloads import accounting, logs, selectors
from workloads.choices import JobState, Priority
from workloads.messages import QueueSummary
from workloads.models import Job, JobEvent, JobTemplate
from workloads.services import jobs as services
from workloads.services import templates as template_services


class TooManyLogStreams(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_log_streams"


class QueueFullError(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "queue_full"


class QueueSummarySerializer(serializers.Serializer[Any]):
    position = serializers.IntegerField(allow_null=True)
    position_in_project = serializers.IntegerField(allow_null=True)
    estimated_start = serializers.DateTimeField(allow_null=True)
    code = serializers.CharField()
    reason = serializers.CharField()
    hints = serializers.ListField(child=serializers.CharField())
    held = serializers.BooleanField()
    text = serializers.CharField(help_text="The whole summary as one line, as the pages show it.")


class JobSerializer(serializers.ModelSerializer[Job]):
    id = serializers.UUIDField(source="uid", read_only=True)
    project: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    owner = serializers.EmailField(source="owner.email", read_only=True)
    k8s_name = serializers.CharField(read_only=True)
    gpu_hours = serializers.SerializerMethodField()
    queue = serializers.SerializerMethodField(
        help_text="Queued jobs: position, estimated start, reason, hints."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "project",
            "owner",
            "image",
            "command",
            "args",
            "env",
            "gpus",
            "gpu_type",
            "mps_slices",
            "cpu_millicores",
            "memory_mib",
            "volumes",
            "priority",
            "max_runtime_minutes",
            "preemptible",
            "state",
            "state_reason",
            "state_changed_at",
            "submitted_at",
            "admitted_at",
            "started_at",
            "finished_at",
            "exit_code",
            "node",
            "k8s_name",
            "gpu_hours",
            "queue",
        ]
        read_only_fields = fields

    def get_gpu_hours(self, job: Job) -> float:
        return round(job.gpu_hours(), 4)

    @extend_schema_field(QueueSummarySerializer(allow_null=True))
    def get_queue(self, job: Job) -> QueueSummary | None:
        return selectors.queue_summary(job)


class JobEventSerializer(serializers.ModelSerializer[JobEvent]):
    class Meta:
        model = JobEvent
        fields = ["at", "kind", "from_state", "to_state", "reason", "message", "object_ref", "count"]
        read_only_fields = fields


class SpecSerializer(serializers.Serializer[Any]):
    """Documentation of the typed spec; the service parses the body itself, strictly."""

    name = serializers.CharField(required=False)
    image = serializers.CharField()
    command = serializers.ListField(child=serializers.CharField(), required=False)
    args = serializers.ListField(child=serializers.CharField(), required=False)
    env = serializers.ListField(child=serializers.DictField(child=serializers.CharField()), required=False)
    gpus = serializers.IntegerField(required=False, min_value=0, max_value=8)
    gpu_type = serializers.CharField(required=False)
    mps_slices = serializers.IntegerField(required=False, min_value=0)
    cpu_millicores = serializers.IntegerField(required=False)
    memory_mib = serializers.IntegerField(required=False)
    volumes = serializers.ListField(child=serializers.DictField(), required=False)
    priority = serializers.ChoiceField(choices=Priority.choices, required=False)
    max_runtime_minutes = serializers.IntegerField(required=False)
    preemptible = serializers.BooleanField(required=False)


class JobCreateSerializer(SpecSerializer):
    project = serializers.SlugField()


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ValidationError({"non_field_errors": ["Send a JSON object."]})
    return dict(request.data)


def _project_for_create(request: Request, body: dict[str, Any]) -> Project:
    slug = body.pop("project", None)
    project = (
        project_list(user=request_user(request)).filter(slug=slug).first() if isinstance(slug, str) else None
    )
    if project is None:
        raise ValidationError({"project": ["Choose one of your projects."]})
    return project


@extend_schema(parameters=[OpenApiParameter("state", enum=JobState.values), OpenApiParameter("project", str)])
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
        body = _body(request)
        project = _project_for_create(request, body)
        try:
            job = services.job_submit(
                actor=request_user(request), project=project, data=body, request=request._request
            )
        except services.QueueFull as exc:
            raise QueueFullError(str(exc)) from exc
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, id: str) -> Response:
        job = services.job_cancel(
            actor=request_user(request), job=self.get_object(), request=request._request
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
                actor=request_user(request), job=self.get_object(), edits=edits, request=request._request
            )
        except services.QueueFull as exc:
            raise QueueFullError(str(exc)) from exc
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: JobEventSerializer(many=True)})
    @action(detail=True, methods=["get"])
    def events(self, request: Request, id: str) -> Response:
        events = selectors.job_events(job=self.get_object())
        return Response(JobEventSerializer(events, many=True).data)

    @extend_schema(parameters=[OpenApiParameter("follow", bool)], responses={(200, "text/plain"): str})
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, id: str) -> StreamingHttpResponse:
        job = self.get_object()
        follow = request.query_params.get("follow") in ("1", "true", "yes")
        asgi = hasattr(request._request, "scope")
        try:
            return logs.log_response(job, follow=follow, user_id=request_user(request).pk, asgi=asgi)
        except logs.TooManyStreams as exc:
            raise TooManyLogStreams(str(exc)) from exc

    @extend_schema(
        parameters=[
            OpenApiParameter("group", enum=["job", "user", "project"]),
            OpenApiParameter("project", str, description="only this project's jobs"),
            OpenApiParameter("state", enum=list(JobState.values), description="only jobs in this state"),
        ],
        responses={(200, "text/csv"): str},
    )
    @action(detail=False, methods=["get"], url_path="accounting")
    def accounting(self, request: Request) -> HttpResponse:
        """Allocated GPU-hours as CSV: per job, or rolled up per user or project (?group=)."""
        params = request.query_params
        group = params.get("group", "job")
        if group not in ("job", "user", "project"):
            raise ValidationError({"group": ["One of job, user, project."]})
        state = params.get("state") or None
        if state is not None and state not in JobState.values:
            raise ValidationError({"state": [f"One of {', '.join(JobState.values)}."]})
        rows = accounting.gpu_hours_rows(
            user=request_user(request), project=params.get("project") or None, state=state
        )
        if group != "job":
            rows = accounting.gpu_hours_rollup(rows, by=group)
        return accounting.csv_response(rows, f"gpu-hours-by-{group}.csv")


class TemplateSerializer(serializers.ModelSerializer[JobTemplate]):
    project: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )

    class Meta:
        model = JobTemplate
        fields = ["id", "project", "name", "description", "spec", "created_at"]
        read_only_fields = fields


TemplateCreate = inline_serializer(
    "TemplateCreate",
    {
        "project": serializers.SlugField(),
        "name": serializers.CharField(),
        "spec": SpecSerializer(),
        "description": serializers.CharField(required=False),
    },
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
        return selectors.template_list(
            user=request_user(self.request), project=self.request.query_params.get("project")
        )

    def get_object(self) -> JobTemplate:
        pk = str(self.kwargs["pk"])
        if not pk.isdigit():
            raise Http404("No such template.")
        return selectors.template_get(user=request_user(self.request), pk=int(pk))

    @extend_schema(request=TemplateCreate, responses={201: TemplateSerializer})
    def create(self, request: Request) -> Response:
        body = _body(request)
        project = _project_for_create(request, body)
        template = template_services.template_create(
            actor=request_user(request),
            project=project,
            name=body.get("name"),
            spec=body.get("spec"),
            description=body.get("description", ""),
            request=request._request,
        )
        return Response(TemplateSerializer(template).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: JobTemplate) -> None:
        template_services.template_delete(
            actor=request_user(self.request), template=instance, request=self.request._request
        )
