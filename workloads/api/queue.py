"""REST API of the admission queue: /api/v1/grants/ (temporary quota grants) and /api/v1/usage/.

Thin like workloads.api.jobs: the project comes from the caller's projects (a foreign project is a field
error, never a hint that it exists); the services validate and audit.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import request_user
from accounts.choices import TokenScope
from accounts.models import Project
from accounts.selectors import project_list
from workloads.accounting import csv_response, usage_history
from workloads.models import QuotaGrant
from workloads.selectors import grant_list, job_list
from workloads.services.grants import grant_request


class GrantSerializer(serializers.ModelSerializer[QuotaGrant]):
    project: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    requested_by = serializers.EmailField(source="requested_by.email", read_only=True, allow_null=True)

    class Meta:
        model = QuotaGrant
        fields = ["id", "project", "requested_by", "gpus", "slices", "starts_at", "until", "reason", "status"]
        read_only_fields = fields


GrantCreate = inline_serializer(
    "GrantCreate",
    {
        "project": serializers.SlugField(),
        "gpus": serializers.IntegerField(min_value=0),
        "slices": serializers.IntegerField(min_value=0, required=False),
        "starts_at": serializers.DateTimeField(required=False),
        "until": serializers.DateTimeField(),
        "reason": serializers.CharField(required=False),
    },
)


def _when(body: dict[str, Any], key: str, required: bool) -> datetime | None:
    raw = body.get(key)
    if raw is None and not required:
        return None
    value = parse_datetime(raw) if isinstance(raw, str) else None
    if value is None or value.tzinfo is None:
        raise ValidationError({key: ["An ISO 8601 date and time with a timezone."]})
    return value


def _count(body: dict[str, Any], key: str) -> int:
    value = body.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 64:
        raise ValidationError({key: ["A whole number from 0 to 64."]})
    return value


class GrantViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[QuotaGrant]):
    """Temporary quota grants of my projects; POST asks for one (operators decide in the admin)."""

    serializer_class = GrantSerializer
    queryset = QuotaGrant.objects.none()
    write_scope = TokenScope.SUBMIT

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return QuotaGrant.objects.none()
        return grant_list(user=request_user(self.request))

    @extend_schema(request=GrantCreate, responses={201: GrantSerializer})
    def create(self, request: Request) -> Response:
        body = request.data if isinstance(request.data, dict) else {}
        slug = body.get("project")
        user = request_user(request)
        project = project_list(user=user).filter(slug=slug).first() if isinstance(slug, str) else None
        if project is None:
            raise ValidationError({"project": ["Choose one of your projects."]})
        reason = body.get("reason", "")
        grant = grant_request(
            actor=user,
            project=project,
            gpus=_count(body, "gpus"),
            slices=_count(body, "slices"),
            starts_at=_when(body, "starts_at", False),
            until=_when(body, "until", True),  # type: ignore[arg-type]
            reason=reason if isinstance(reason, str) else "",
            request=request._request,
        )
        return Response(GrantSerializer(grant).data, status=status.HTTP_201_CREATED)


def usage_jobs(request: Request) -> Any:
    project = request.query_params.get("project") or None
    return job_list(user=request_user(request), project=project)


class UsageView(APIView):
    """GPU-hours per user or project per day (my projects), as JSON or CSV (?export=csv)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("project", str),
            OpenApiParameter("group", enum=["user", "project"]),
            OpenApiParameter("bucket", enum=["day"]),
            OpenApiParameter("days", int),
            OpenApiParameter("export", enum=["json", "csv"]),
        ],
        responses={
            200: inline_serializer(
                "UsageRow",
                {
                    "day": serializers.DateField(),
                    "key": serializers.CharField(),
                    "gpu_hours": serializers.FloatField(),
                },
                many=True,
            )
        },
    )
    def get(self, request: Request) -> Response | HttpResponse:
        params = request.query_params
        group = params.get("group", "project")
        if group not in ("user", "project") or params.get("bucket", "day") != "day":
            raise ValidationError({"group": ["group is user or project; bucket is day."]})
        days = params.get("days", "30")
        if not days.isdigit() or not 1 <= int(days) <= 366:
            raise ValidationError({"days": ["1 to 366."]})
        rows = usage_history(jobs=usage_jobs(request), group=group, days=int(days))
        if params.get("export") == "csv":
            return csv_response(rows, f"usage-by-{group}.csv")
        return Response(rows)
