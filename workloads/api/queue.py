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
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.generics import GenericAPIView
from rest_framework.request import Request
from rest_framework.response import Response

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
        fields = [
            "id",
            "project",
            "requested_by",
            "gpus",
            "gpu_type",
            "slices",
            "starts_at",
            "until",
            "reason",
            "status",
        ]
        read_only_fields = fields


GrantCreate = inline_serializer(
    "GrantCreate",
    {
        "project": serializers.SlugField(),
        "gpus": serializers.IntegerField(min_value=0),
        "slices": serializers.IntegerField(min_value=0, required=False),
        "gpu_type": serializers.CharField(
            required=False,
            help_text="A GPU product of the cluster (node label nvidia.com/gpu.product): the grant also "
            "raises the project's limit for that type. Omitted or empty: any type. Unknown: 400.",
        ),
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
        reason, gpu_type = body.get("reason", ""), body.get("gpu_type", "")
        if not isinstance(gpu_type, str):
            raise ValidationError({"gpu_type": ["A GPU type name, such as NVIDIA-GeForce-RTX-5090."]})
        grant = grant_request(
            actor=user,
            project=project,
            gpus=_count(body, "gpus"),
            slices=_count(body, "slices"),
            gpu_type=gpu_type,
            starts_at=_when(body, "starts_at", False),
            until=_when(body, "until", True),  # type: ignore[arg-type]
            reason=reason if isinstance(reason, str) else "",
            request=request,
        )
        return Response(GrantSerializer(grant).data, status=status.HTTP_201_CREATED)


def usage_jobs(request: Request) -> Any:
    project = request.query_params.get("project") or None
    return job_list(user=request_user(request), project=project)


class UsageRowSerializer(serializers.Serializer[Any]):
    day = serializers.DateField(help_text="A UTC day.")
    key = serializers.CharField(
        help_text="The project's slug (group=project) or the user's email (group=user)."
    )
    gpu_hours = serializers.FloatField(help_text="GPU-hours held that day (slices count as a fraction).")
    used_gpu_hours = serializers.FloatField(
        help_text="The part of gpu_hours the GPUs were busy (SM utilisation at or above the busy threshold)."
    )

    class Meta:
        ref_name = "UsageRow"


def _usage_params(request: Request) -> tuple[str, int, str]:
    params = request.query_params
    group, bucket, export = (
        params.get("group", "project"),
        params.get("bucket", "day"),
        params.get("export", "json"),
    )
    if group not in ("user", "project"):
        raise ValidationError({"group": ["user or project."]})
    if bucket != "day":
        raise ValidationError({"bucket": ["day (the only bucket so far)."]})
    if export not in ("json", "csv"):
        raise ValidationError({"export": ["json or csv."]})
    days = params.get("days", "30")
    if not days.isdigit() or not 1 <= int(days) <= 366:
        raise ValidationError({"days": ["A whole number from 1 to 366."]})
    return group, int(days), export


class UsageView(GenericAPIView[Any]):
    """GPU-hours per user or project per day (my projects): JSON in pages like every list, or the
    whole history as CSV (?export=csv, with a `project` or `user` column)."""

    serializer_class = UsageRowSerializer
    filter_backends: list[Any] = []  # rows computed per day, not a queryset to filter

    @extend_schema(
        operation_id="v1_usage_list",
        parameters=[
            OpenApiParameter("project", str, description="only this project's jobs (a slug)"),
            OpenApiParameter("group", enum=["user", "project"], description="default project"),
            OpenApiParameter("bucket", enum=["day"]),
            OpenApiParameter(
                "days",
                {"type": "integer", "minimum": 1, "maximum": 366},
                description="how many days back (default 30)",
            ),
            OpenApiParameter("export", enum=["json", "csv"], description="csv: every row, no pages"),
        ],
        responses={
            (200, "application/json"): UsageRowSerializer(many=True),
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    def get(self, request: Request) -> Response | HttpResponse:
        group, days, export = _usage_params(request)
        rows = usage_history(jobs=usage_jobs(request), group=group, days=days)
        if export == "csv":
            self.paginator.check_query(request)  # type: ignore[union-attr]  # portal.api.pagination
            return csv_response(rows, f"usage-by-{group}.csv")
        page = self.paginate_queryset(rows)  # type: ignore[arg-type]  # a list pages like a queryset
        data = [
            {
                "day": r["day"],
                "key": r[group],
                "gpu_hours": r["gpu_hours"],
                "used_gpu_hours": r["used_gpu_hours"],
            }
            for r in page or []
        ]
        return self.get_paginated_response(data)
