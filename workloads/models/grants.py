"""Temporary quota: grants and reservations a project asks for and operators decide."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import Project


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
