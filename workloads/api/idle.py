"""The idle-reclaim part of a job's API: what the job's `idle` field holds, and the exempt body."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from workloads.models import Job
from workloads.selectors import idle_reclaimed_gpu_hours


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
