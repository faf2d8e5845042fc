"""GPU jobs and what hangs off them. Fields, constraints and single-row computation only: no I/O,
so every write path is a service and every read a selector.

Concurrency: a job's `state` only moves through compare-and-swap updates in `workloads.services.transitions`
(`filter(pk=..., state=old).update(state=new)`), never through `save()` of a stale instance.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from accounts.models import Project
from workloads import app_settings
from workloads.choices import TERMINAL_STATES, EventKind, JobState, Placement, Priority

# The app's models live in two files (models_project.py: a project's job configuration); both are
# imported from here.
from workloads.models_project import ImageRule, JobTemplate, ProjectVolume, VolumeAccessMode
from workloads.queue.fairshare import gpu_equivalent
from workloads.spec import JobSpec, spec_from_values, spec_values
from workloads.spec.fields import SPEC_FIELDS

__all__ = [
    "GrantStatus",
    "ImageRule",
    "Job",
    "JobEvent",
    "JobTemplate",
    "OrphanReport",
    "ProjectVolume",
    "QueueSettings",
    "QueuedJob",
    "QuotaGrant",
    "ReconcileOutbox",
    "VolumeAccessMode",
]


class Job(models.Model):
    """One GPU job: the typed spec a user asked for, and the state the cluster reported back."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="jobs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(max_length=80, blank=True)
    rerun_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    # The typed spec (workloads.spec.JobSpec; never a raw pod spec): a field SQL reads (the queue, the
    # accounting, the API's filters, the pages) has a column of its name, every other one is in
    # `spec_rest`. `spec_columns` and `job_spec` map between the two; no field is listed here twice.
    image = models.CharField(max_length=300)
    command = models.JSONField(default=list, blank=True)
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=list, blank=True, help_text='[{"name": ..., "value": ...}]')
    gpus = models.PositiveSmallIntegerField(default=0)
    gpu_type = models.CharField(max_length=80, blank=True)
    mps_slices = models.PositiveSmallIntegerField(default=0)
    cpu_millicores = models.PositiveIntegerField(default=1000)
    memory_mib = models.PositiveIntegerField(default=4096)
    volumes = models.JSONField(default=list, blank=True, help_text='[{"volume", "mount_path", "read_only"}]')
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    max_runtime_minutes = models.PositiveIntegerField(default=60, validators=[MinValueValidator(1)])
    preemptible = models.BooleanField(default=False)
    interactive = models.BooleanField(
        default=False, help_text="A session someone works in (notebook, shell): the interactive idle window."
    )
    placement = models.CharField(max_length=12, choices=Placement.choices, default=Placement.ANY, blank=True)
    spec_rest = models.JSONField(
        default=dict, blank=True, help_text="The spec's fields that have no column of their own."
    )

    state = models.CharField(max_length=12, choices=JobState.choices, default=JobState.QUEUED, db_index=True)
    state_reason = models.CharField(max_length=300, blank=True)
    state_changed_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(default=timezone.now, db_index=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.SmallIntegerField(null=True, blank=True)
    node = models.CharField(max_length=253, blank=True)
    pod_name = models.CharField(max_length=253, blank=True)
    created_in_cluster_at = models.DateTimeField(null=True, blank=True)
    deleted_in_cluster_at = models.DateTimeField(null=True, blank=True)
    # When a successful read first showed this running job's Job without a pod or an outcome;
    # cleared by any evidence (workloads.services.evidence).
    no_evidence_since = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    log_tail = models.TextField(blank=True)
    log_truncated = models.BooleanField(default=False)
    log_captured = models.BooleanField(default=False)

    # The admission queue (workloads.services.queue writes these, by compare-and-swap).
    held = models.BooleanField(default=False, help_text="Held by an operator: keeps its place, never starts.")
    queue_front = models.BooleanField(
        default=False, help_text="First within its priority (moved, or preempted)."
    )
    borrowing = models.BooleanField(default=False, help_text="Admitted on idle quota of other projects.")
    queue_explanation = models.JSONField(default=dict, blank=True, help_text="Last cycle's Explanation.")
    queue_position = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    planned_node = models.CharField(max_length=253, blank=True, help_text="Node the queue placed it on.")
    preempt_deadline = models.DateTimeField(null=True, blank=True, help_text="Preemption notice ends.")
    preempt_notice_at = models.DateTimeField(null=True, blank=True)
    preempt_for = models.BigIntegerField(
        null=True, blank=True, help_text="Job id the GPUs are reclaimed for."
    )

    # From the node agents' samples (workloads.services.peaks): right-sizing and used GPU-hours.
    peak_gpu_mem_mib = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most GPU memory the job's own processes held on one GPU."
    )
    peak_sm_pct = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Highest SM utilisation of a GPU running the job (%)."
    )
    gpu_mem_total_mib = models.PositiveIntegerField(
        null=True, blank=True, help_text="Memory of the GPU it ran on, as the agent reported it."
    )
    busy_gpu_seconds = models.FloatField(
        default=0.0, help_text="GPU-seconds with SM utilisation at or above the busy threshold."
    )
    telemetry_until = models.DateTimeField(
        null=True, blank=True, help_text="Newest sample counted; older ones (a retried batch) are not."
    )

    # Idle-GPU reclaim (workloads.services.idle): warned, snoozed, suspended, resumed.
    idle_exempt = models.BooleanField(default=False, help_text="Set by a manager: never reclaimed when idle.")
    idle_reset_at = models.DateTimeField(
        null=True, blank=True, help_text="A snooze or resume: the idle window counts from here."
    )
    idle_warned_at = models.DateTimeField(null=True, blank=True, help_text="Idle warning sent.")
    idle_snoozes = models.PositiveSmallIntegerField(default=0)
    idle_suspended_at = models.DateTimeField(
        null=True, blank=True, help_text="Suspended for idle GPUs; waits for its owner to resume it."
    )
    idle_reclaimed_gpu_hours = models.FloatField(
        default=0.0, help_text="GPU-hours given back while suspended for idleness (closed periods)."
    )

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [models.Index(fields=["project", "state"])]
        constraints = [
            models.CheckConstraint(
                condition=~(models.Q(gpus__gt=0) & models.Q(mps_slices__gt=0)), name="job_gpus_or_slices"
            )
        ]

    def __str__(self) -> str:
        return self.name or self.k8s_name

    @classmethod
    def spec_column_names(cls) -> tuple[str, ...]:
        """The spec's fields that have a column of their own, in the declaration's order."""
        return _spec_column_names(cls)

    @classmethod
    def spec_columns(cls, spec: JobSpec) -> dict[str, Any]:
        """The column values that store a spec: its own column per field where the Job has one, the
        other fields in `spec_rest`."""
        values, own = spec_values(spec), cls.spec_column_names()
        columns = {name: value for name, value in values.items() if name in own}
        return {**columns, "spec_rest": {k: v for k, v in values.items() if k not in own}}

    def job_spec(self) -> JobSpec:
        """The spec this row stores (reruns, templates, the Kubernetes Job)."""
        return spec_from_values({**self.spec_rest, **{n: getattr(self, n) for n in self.spec_column_names()}})

    @property
    def k8s_name(self) -> str:
        """Deterministic, so a retried create answers 409 instead of making a second Job."""
        return f"job-{self.uid}"

    @property
    def namespace(self) -> str:
        return self.project.namespace

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def gpu_hours(self, now: datetime | None = None) -> float:
        """Allocated GPU-hours: whole GPUs, or MPS slices as fractions of a GPU, times run time."""
        if self.started_at is None:
            return 0.0
        end = self.finished_at or now or timezone.now()
        hours = max(0.0, (end - self.started_at).total_seconds() / 3600)
        return hours * self.gpu_equivalent

    @property
    def gpu_equivalent(self) -> float:
        """Whole GPUs, or MPS slices as fractions of a GPU: the queue's own formula."""
        return gpu_equivalent(self.gpus, self.mps_slices, app_settings.mps_slices_per_gpu())


@functools.cache
def _spec_column_names(model: type[models.Model]) -> tuple[str, ...]:
    columns = {f.name for f in model._meta.concrete_fields}
    return tuple(f.name for f in SPEC_FIELDS if f.name in columns)


class JobEvent(models.Model):
    """The job's timeline: state changes with their reason, actions, and Kubernetes events."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=12, choices=EventKind.choices)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    from_state = models.CharField(max_length=12, blank=True)
    to_state = models.CharField(max_length=12, blank=True)
    reason = models.CharField(max_length=120, blank=True)
    message = models.TextField(blank=True)
    object_ref = models.CharField(max_length=300, blank=True, help_text="Kind/name of the involved object")
    k8s_uid = models.CharField(max_length=64, null=True, blank=True, unique=True)
    count = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.kind} {self.reason}"


class ReconcileOutbox(models.Model):
    """Intent that must reach the cluster, written in the same transaction as the change.

    The on-commit publish may be lost (Redis down, crash between commit and publish); the
    controller republishes rows that made no progress, and the reconcile deletes the row once
    the cluster matches. So a submission survives any Redis outage.
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="outbox")
    requested_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True, db_index=True)
    attempts = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"outbox {self.job_id}"


class OrphanReport(models.Model):
    """A cluster Job with the portal's labels but no portal row: reported, never deleted silently."""

    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    job_uid = models.CharField(max_length=64, blank=True)
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_seen"]
        constraints = [models.UniqueConstraint(fields=["namespace", "name"], name="one_orphan_report")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class GrantStatus(models.TextChoices):
    REQUESTED = "requested", "Requested"
    APPROVED = "approved", "Approved"
    REFUSED = "refused", "Refused"
    EXPIRED = "expired", "Expired"


class QuotaGrant(models.Model):
    """A temporary quota grant or reservation ("+4 GPUs for 48 h from Monday").

    Users request it; operators approve or refuse it in the admin. An approved grant adds to the
    project's quota while `starts_at <= now < until`; a periodic task marks it expired afterwards.
    With a `gpu_type` it also raises that type's `GpuTypeLimit` of the project, if there is one.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="quota_grants")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    gpus = models.PositiveIntegerField(default=0)
    slices = models.PositiveIntegerField(default=0)
    gpu_type = models.CharField(
        max_length=80,
        blank=True,
        help_text="Node label nvidia.com/gpu.product: the grant also raises the project's limit for "
        "this GPU type (where it has one). Empty: any type.",
    )
    starts_at = models.DateTimeField(default=timezone.now)
    until = models.DateTimeField()
    reason = models.CharField(max_length=300, blank=True)
    status = models.CharField(
        max_length=10, choices=GrantStatus.choices, default=GrantStatus.REQUESTED, db_index=True
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(until__gt=models.F("starts_at")), name="grant_ends_after"
            )
        ]

    def __str__(self) -> str:
        kind = f" {self.gpu_type}" if self.gpu_type else ""
        return (
            f"{self.project}: +{self.gpus}{kind} GPUs/+{self.slices} slices until {self.until:%Y-%m-%d %H:%M}"
        )

    def is_active(self, now: datetime) -> bool:
        return self.status == GrantStatus.APPROVED and self.starts_at <= now < self.until


class QueueSettings(models.Model):
    """The operators' queue knobs; one row (pk=1), edited in the admin."""

    half_life_hours = models.FloatField(default=168.0, validators=[MinValueValidator(0.1)])
    borrowing_enabled = models.BooleanField(default=True)
    preemption_notice_s = models.PositiveIntegerField(default=300)
    # Each queued job is a suspended Kubernetes Job and a row every admission cycle reads: a bound
    # keeps one user (or a runaway script) from filling the cluster's etcd and slowing every cycle.
    max_queued_per_user = models.PositiveIntegerField(
        default=500, help_text="Queued jobs one user may have in one project; the next submit answers 429."
    )
    max_queued_per_project = models.PositiveIntegerField(
        default=2000, help_text="Queued jobs one project may have; the next submit answers 429."
    )
    # Idle-GPU reclaim (docs/operator-guide.md "Idle GPUs"): a running job whose GPUs stay under both
    # thresholds for the window is warned, then suspended `idle_warning_s` later unless busy or snoozed.
    idle_reclaim_enabled = models.BooleanField(default=True)
    idle_util_pct = models.PositiveSmallIntegerField(
        default=5,
        validators=[MaxValueValidator(100)],
        help_text="Idle: SM utilisation always below this (%).",
    )
    idle_mem_change_pct = models.PositiveSmallIntegerField(
        default=5,
        validators=[MaxValueValidator(100)],
        help_text="Idle: GPU memory used moved by less than this share of the GPU's memory (%).",
    )
    idle_window_s = models.PositiveIntegerField(
        default=1800, validators=[MinValueValidator(60)], help_text="Idle this long before the warning."
    )
    idle_warning_s = models.PositiveIntegerField(
        default=600, validators=[MinValueValidator(0)], help_text="From the warning to the suspension."
    )
    idle_max_snoozes = models.PositiveSmallIntegerField(
        default=2, help_text="Snoozes per job; each resets the window."
    )
    # A notebook sits idle while its user reads and types: a longer window of its own, or none.
    idle_interactive_window_s = models.PositiveIntegerField(
        default=7200,
        help_text="Interactive jobs: idle this long before the warning; 0 never reclaims them.",
    )

    class Meta:
        verbose_name = verbose_name_plural = "queue settings"

    def __str__(self) -> str:
        return "Queue settings"

    def clean(self) -> None:
        # The rule re-checks the sliding window at suspension: a warning longer than the window would let
        # a busy spike in the warning period slide out of it unseen.
        if self.idle_warning_s > self.idle_window_s:
            raise ValidationError(
                {"idle_warning_s": "The warning period cannot be longer than the idle window."}
            )
        if 0 < self.idle_interactive_window_s < self.idle_warning_s:
            raise ValidationError(
                {"idle_interactive_window_s": "Shorter than the warning period: make it longer, or 0."}
            )

    @classmethod
    def load(cls) -> QueueSettings:
        row, _ = cls.objects.get_or_create(pk=1)
        return row


class QueuedJob(Job):
    """The admission queue as operators see it in the admin (queued jobs in admission order)."""

    class Meta:
        proxy = True
        verbose_name = "queued job"
        verbose_name_plural = "admission queue"
