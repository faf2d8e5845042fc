"""What the reconcile keeps beside the jobs: intent on its way to the cluster, and cluster Jobs that
no row owns."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from workloads.models.job import Job


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
