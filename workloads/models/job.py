"""A GPU job, its timeline, and the admission queue's view of it (the admin's proxy).

Concurrency: a job's `state` only moves through compare-and-swap updates in `workloads.services.transitions`
(`filter(pk=..., state=old).update(state=new)`), never through `save()` of a stale instance.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone

from accounts.models import Project
from workloads import app_settings
from workloads.choices import TERMINAL_STATES, EventKind, JobState, Placement, Priority
from workloads.queue.fairshare import gpu_equivalent
from workloads.spec import JobSpec, spec_from_values, spec_values
from workloads.spec.fields import SPEC_FIELDS


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
    workers = models.PositiveSmallIntegerField(default=1, validators=[MinValueValidator(1)])
    gpus = models.PositiveSmallIntegerField(default=0, help_text="Whole GPUs per worker.")
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
    worker_nodes = models.JSONField(
        default=list, blank=True, help_text="A job of several workers: the node the queue placed each on."
    )
    hang_noticed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A job of several workers: when every worker's GPUs were seen idle after being busy.",
    )
    restarts = models.PositiveSmallIntegerField(
        default=0, help_text="A job of several workers: times all its workers started again after one failed."
    )
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
            ),
            models.CheckConstraint(
                condition=models.Q(workers=1) | models.Q(mps_slices=0), name="job_slices_one_worker"
            ),
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
        """Whole GPUs of all workers, or MPS slices as fractions of a GPU: the queue's own formula."""
        return self.workers * gpu_equivalent(self.gpus, self.mps_slices, app_settings.mps_slices_per_gpu())

    @property
    def planned_nodes(self) -> list[str]:
        """The node the queue placed each worker on, by worker index; [] before admission."""
        if self.worker_nodes:
            return [str(n) for n in self.worker_nodes]
        return [self.planned_node] if self.planned_node else []


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


class QueuedJob(Job):
    """The admission queue as operators see it in the admin (queued jobs in admission order)."""

    class Meta:
        proxy = True
        verbose_name = "queued job"
        verbose_name_plural = "admission queue"
