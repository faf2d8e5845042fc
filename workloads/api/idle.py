"""The idle-reclaim part of the API: a job's `idle` field, the exempt body, and a project's totals
(GET /api/v1/projects/<slug>/idle-reclaim/, with the policy in force)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api import request_user
from accounts.selectors import project_get
from workloads.models import Job, QueueSettings
from workloads.selectors import idle_reclaimed_gpu_hours, project_idle_summary
from workloads.services.idle import thresholds


class IdleSerializer(serializers.Serializer[Any]):
    exempt = serializers.BooleanField(help_text="A manager exempted it: never reclaimed when idle.")
    warned_at = serializers.DateTimeField(allow_null=True, help_text="Idle warning sent (null: none now).")
    snoozes = serializers.IntegerField(help_text="Snoozes used (each restarts the idle window).")
    suspended_at = serializers.DateTimeField(
        allow_null=True, help_text="Suspended for idle GPUs: POST idle-resume to queue it again."
    )
    reclaimed_gpu_hours = serializers.FloatField(help_text="GPU-hours given back while suspended.")


class IdleExemptSerializer(serializers.Serializer[Any]):
    exempt = serializers.BooleanField()


def idle_of(job: Job) -> dict[str, Any]:
    """From the row alone (no query), so a list stays constant in queries."""
    return {
        "exempt": job.idle_exempt,
        "warned_at": job.idle_warned_at,
        "snoozes": job.idle_snoozes,
        "suspended_at": job.idle_suspended_at,
        "reclaimed_gpu_hours": round(idle_reclaimed_gpu_hours(job=job), 4),
    }


IdlePolicy = inline_serializer(
    "IdlePolicy",
    {
        "enabled": serializers.BooleanField(),
        "util_pct": serializers.IntegerField(help_text="Idle: SM utilisation always below this (%)."),
        "mem_change_pct": serializers.IntegerField(
            help_text="Idle: memory used moved by less than this share of the GPU's memory (%)."
        ),
        "window_s": serializers.IntegerField(help_text="Idle this long before the warning."),
        "interactive_window_s": serializers.IntegerField(
            help_text="The same for interactive jobs; 0: they are never reclaimed."
        ),
        "warning_s": serializers.IntegerField(help_text="From the warning to the suspension."),
        "max_snoozes": serializers.IntegerField(help_text="Snoozes per job; each restarts the window."),
    },
)


def policy_of(row: QueueSettings) -> dict[str, Any]:
    """The sweep's own thresholds (services.idle.thresholds), with the switch and the interactive window."""
    return {
        "enabled": row.idle_reclaim_enabled,
        **asdict(thresholds(row)),
        "interactive_window_s": row.idle_interactive_window_s,
    }


ProjectIdle = inline_serializer(
    "ProjectIdleReclaim",
    {
        "project": serializers.SlugField(),
        "policy": IdlePolicy,
        "reclaimed_gpu_hours": serializers.FloatField(
            help_text="GPU-hours given back by idle-suspended jobs."
        ),
        "warned_jobs": serializers.IntegerField(help_text="Running jobs with an idle warning now."),
        "suspended_jobs": serializers.IntegerField(
            help_text="Jobs suspended for idle GPUs, waiting to resume."
        ),
    },
)


class ProjectIdleView(APIView):
    """A project's idle-reclaim figures (a foreign project is 404)."""

    @extend_schema(operation_id="v1_projects_idle_reclaim_retrieve", responses={200: ProjectIdle})
    def get(self, request: Request, project_slug: str) -> Response:
        project = project_get(user=request_user(request), slug=project_slug)
        summary = project_idle_summary(project=project)
        return Response({"project": project.slug, "policy": policy_of(QueueSettings.load()), **summary})
