"""What the jobs and templates API sends, and the typed spec it documents for what it takes.

The spec serializers only document: the services parse every body themselves, strictly
(workloads.spec.parse_spec), with the project's limits. They are made from the spec's declaration
(workloads.spec.schema), so their bounds are the parser's whatever the project; the project's quota
narrows the maxima further.
"""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.models import Project
from workloads import accounting, selectors
from workloads.api.idle import IdleSerializer, idle_of
from workloads.api.rightsizing import RightsizingSerializer, plan_of, rightsizing_of
from workloads.messages import QueueSummary
from workloads.models import Job, JobEvent, JobTemplate
from workloads.spec.schema import spec_serializer


class QueueSummarySerializer(serializers.Serializer[Any]):
    position = serializers.IntegerField(allow_null=True)
    position_in_project = serializers.IntegerField(allow_null=True)
    estimated_start = serializers.DateTimeField(allow_null=True)
    code = serializers.CharField()
    reason = serializers.CharField()
    hints = serializers.ListField(child=serializers.CharField())
    held = serializers.BooleanField()
    text = serializers.CharField(help_text="The whole summary as one line, as the pages show it.")


# The job spec's serializers are made from its declaration (workloads.spec.schema); they only document.
SpecSerializer = spec_serializer("Spec")
JobCreateSerializer = spec_serializer(
    "JobCreate", extra={"project": serializers.SlugField(help_text="One of your projects, by slug.")}
)


def _when(value: datetime | None, tz: tzinfo) -> str | None:
    """DRF's DateTimeField output: ISO 8601 in the current time zone, UTC written as Z."""
    if value is None:
        return None
    text = value.astimezone(tz).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


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
    reason = serializers.SerializerMethodField(
        help_text='Why the job is where it is, in words: "running on gpu-node-1 since 14:02 UTC".'
    )
    rightsizing = serializers.SerializerMethodField(help_text="GPU peaks, used GPU-hours, a smaller size.")
    idle = serializers.SerializerMethodField(help_text="Idle-GPU reclaim: warning, snoozes, suspension.")

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
            "workers",
            "volumes",
            "priority",
            "max_runtime_minutes",
            "preemptible",
            "interactive",
            "state",
            "state_reason",
            "reason",
            "state_changed_at",
            "submitted_at",
            "admitted_at",
            "started_at",
            "finished_at",
            "exit_code",
            "node",
            "worker_nodes",
            "k8s_name",
            "gpu_hours",
            "queue",
            "rightsizing",
            "idle",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Job) -> dict[str, Any]:
        """The fields above in one pass: DRF's field objects took a third of a page of 100 jobs
        (a getattr chain, type checks and a time-zone lookup per value; B9). Equal to DRF's own
        output, field for field (workloads/tests/test_api_job_output.py)."""
        job = instance
        tz = timezone.get_current_timezone()
        out: dict[str, Any] = {
            "id": str(job.uid),
            "name": job.name,
            "project": job.project.slug,
            "owner": job.owner.email,
        }
        for name in _PLAIN:
            out[name] = getattr(job, name)
        out["reason"] = self.get_reason(job)
        for name in _TIMES:
            out[name] = _when(getattr(job, name), tz)
        out["exit_code"] = job.exit_code
        out["node"] = job.node
        out["worker_nodes"] = job.worker_nodes
        out["k8s_name"] = job.k8s_name
        out["gpu_hours"] = self.get_gpu_hours(job)
        out["queue"] = self.get_queue(job)
        out["rightsizing"] = self.get_rightsizing(job)
        out["idle"] = self.get_idle(job)
        return out

    def get_gpu_hours(self, job: Job) -> float:
        # Priced like the accounting export: slices at the count of the GPUs of the job's node.
        return round(accounting.job_gpu_hours(job, timezone.now(), plan_of(self.context)), 4)

    def get_reason(self, job: Job) -> str:
        return selectors.job_reason_line(job)

    @extend_schema_field(QueueSummarySerializer(allow_null=True))
    def get_queue(self, job: Job) -> QueueSummary | None:
        return selectors.queue_summary(job)

    @extend_schema_field(RightsizingSerializer)
    def get_rightsizing(self, job: Job) -> dict[str, Any]:
        return rightsizing_of(job, self.context)

    @extend_schema_field(IdleSerializer)
    def get_idle(self, job: Job) -> dict[str, Any]:
        return idle_of(job)


def _fields_between(first: str, last: str) -> tuple[str, ...]:
    """JobSerializer's fields from `first` to `last`, both included, in its order."""
    fields = JobSerializer.Meta.fields
    return tuple(fields[fields.index(first) : fields.index(last) + 1])


# The runs of JobSerializer's fields its one-pass body sends as stored, and as DRF's DateTimeField.
_PLAIN = _fields_between("image", "state_reason")
_TIMES = _fields_between("state_changed_at", "finished_at")


class JobEventSerializer(serializers.ModelSerializer[JobEvent]):
    class Meta:
        model = JobEvent
        fields = ["at", "kind", "from_state", "to_state", "reason", "message", "object_ref", "count"]
        read_only_fields = fields


class TemplateSerializer(serializers.ModelSerializer[JobTemplate]):
    project: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    spec = serializers.SerializerMethodField(help_text="The saved spec, as parsed when it was saved.")

    class Meta:
        model = JobTemplate
        fields = ["id", "project", "name", "description", "spec", "created_at"]
        read_only_fields = fields

    @extend_schema_field(SpecSerializer)
    def get_spec(self, template: JobTemplate) -> dict[str, Any]:
        spec: dict[str, Any] = template.spec
        return spec


class TemplateWriteSerializer(serializers.Serializer[Any]):
    """PUT replaces name, description and spec; PATCH changes only the fields it sends."""

    rejects_unknown_fields = True

    name = serializers.CharField(max_length=80)
    description = serializers.CharField(required=False, allow_blank=True)
    spec = SpecSerializer(help_text="Replaces the saved spec whole.")


class TemplateCreateSerializer(TemplateWriteSerializer):
    project = serializers.SlugField(help_text="One of your projects, by slug.")


class TemplateFromJobSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(max_length=80)
    description = serializers.CharField(required=False, allow_blank=True)
