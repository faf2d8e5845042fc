"""Tenancy models. Fields, constraints and single-row computation only; writes live in services.py."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from accounts.choices import NotifyEvent, Role, TokenScope

# A Kubernetes namespace name is a DNS-1123 label (<= 63 chars); the slug becomes "<prefix><slug>",
# so it is kept to 40 characters to leave room for any prefix an operator configures.
DNS_LABEL = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    "Use lower-case letters, digits and '-', starting and ending with a letter or digit.",
)


class User(AbstractUser):
    """A person. Staff are operators; everything else comes from project memberships."""

    email = models.EmailField("email address", unique=True)
    notify_by_email = models.BooleanField(default=True, help_text="Email me about my jobs at all.")
    # NotifyEvent values that do NOT email this user; empty (all on) by default, so a kind added
    # later emails everyone until they turn it off.
    email_muted = models.JSONField(default=list, blank=True, help_text="Job events not emailed.")
    # The second factor operator power rests on (accounts/operator_factor.py): one set up before the
    # staff grant, or one confirmed through a link mailed to the account. Gone with the factor.
    operator_factor = models.OneToOneField(
        "mfa.Authenticator",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )

    def __str__(self) -> str:
        return self.email or self.username

    def emails_about(self, event: str) -> bool:
        return self.notify_by_email and event not in self.email_muted

    def email_events(self) -> dict[str, bool]:
        """Each NotifyEvent: is it on (the box, not the master switch)."""
        return {event: event not in self.email_muted for event in NotifyEvent.values}


def namespace_for(slug: str) -> str:
    """A project's Kubernetes namespace, from its slug alone (for reads that fetch slugs, not rows)."""
    return f"{settings.GPUPORTAL_NAMESPACE_PREFIX}{slug}"


class Project(models.Model):
    """A tenant: one Kubernetes namespace, one quota, a set of members."""

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    slug = models.CharField(max_length=40, unique=True, validators=[DNS_LABEL])
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def namespace(self) -> str:
        return namespace_for(self.slug)


class Membership(models.Model):
    """A user's role in one project."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_membership_per_user")]
        ordering = ["project", "user"]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"


class Quota(models.Model):
    """What a project may hold at once. Edited by operators only; managers cannot raise it."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="quota")
    gpus = models.PositiveIntegerField(default=0, help_text="Whole GPUs, any type.")
    mps_slices = models.PositiveIntegerField(default=0, help_text="MPS slices (nvidia.com/gpu.shared).")
    cpu_millicores = models.PositiveIntegerField(default=16000)
    memory_mib = models.PositiveIntegerField(default=131072)
    max_concurrent_jobs = models.PositiveIntegerField(default=10)
    max_runtime_minutes = models.PositiveIntegerField(default=24 * 60, validators=[MinValueValidator(1)])

    def __str__(self) -> str:
        return f"quota of {self.project}"


class GpuTypeLimit(models.Model):
    """Per-GPU-type cap inside the project quota (e.g. at most 2 of the 8 GPUs may be RTX 5090)."""

    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="gpu_type_limits")
    gpu_type = models.CharField(max_length=80, help_text="Node label nvidia.com/gpu.product")
    gpus = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["quota", "gpu_type"], name="one_limit_per_gpu_type")]

    def __str__(self) -> str:
        return f"{self.gpu_type}: {self.gpus}"


class UserCap(models.Model):
    """A per-user ceiling inside one project; blank means the project quota alone applies."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="user_caps")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="caps")
    gpus = models.PositiveIntegerField(null=True, blank=True)
    mps_slices = models.PositiveIntegerField(null=True, blank=True)
    max_concurrent_jobs = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="one_cap_per_user")]

    def __str__(self) -> str:
        return f"cap of {self.user} in {self.project}"


class ApiToken(models.Model):
    """A personal token. Only a SHA-256 digest of the secret is stored; the secret is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=80)
    prefix = models.CharField(max_length=12, unique=True, help_text="Public part, shown in lists.")
    digest = models.CharField(max_length=64, unique=True)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_ip = models.GenericIPAddressField(null=True, blank=True)
    # The token whose request created this one. A child draws its power from its parent, so it
    # never outlives it, is revoked with it, and goes with it if the parent row is deleted.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children", editable=False
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def is_usable(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def has_scope(self, scope: TokenScope) -> bool:
        return scope in self.scopes


class AuditLog(models.Model):
    """One state-changing action: who, what, on which object, before/after, from where, when."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_repr = models.CharField(max_length=200, blank=True)
    action = models.CharField(max_length=80, db_index=True)
    object_type = models.CharField(max_length=80, db_index=True)
    object_id = models.CharField(max_length=64, blank=True)
    object_repr = models.CharField(max_length=200, blank=True)
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_repr} {self.action} {self.object_repr}"


class ProjectWebhook(models.Model):
    """Where the project's job events are POSTed, signed with HMAC-SHA256 under `secret`."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="webhook")
    url = models.URLField(max_length=500)
    # Kept in clear: signing needs it. Shown once to the manager who set the hook.
    secret = models.CharField(max_length=64, editable=False)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"webhook of {self.project.slug}"


class WebhookDelivery(models.Model):
    """One event for one webhook, and how its delivery went (the admin's delivery log)."""

    webhook = models.ForeignKey(ProjectWebhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    last_status = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.event} -> {self.webhook.project.slug}"
