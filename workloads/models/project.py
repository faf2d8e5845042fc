"""A project's job configuration: saved templates, allowed images and mountable volumes.

The app's migrations own them like any other workloads model.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

from accounts.models import DNS_LABEL, Project


class JobTemplate(models.Model):
    """A saved, typed job spec of a project (the seed's "config files", not raw YAML)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="job_templates")
    name = models.CharField(max_length=80)
    description = models.TextField(blank=True)
    spec = models.JSONField(help_text="Validated by workloads.spec.parse_spec on every save.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["project", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_template_name")]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"


REGISTRY = RegexValidator(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$", "A registry host[:port].")
REPOSITORY = RegexValidator(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*$", "A repository path, e.g. team/train."
)


class ImageRule(models.Model):
    """One allowed image: an exact registry and an exact repository; any tag or digest of it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="image_rules")
    registry = models.CharField(max_length=253, validators=[REGISTRY])
    repository = models.CharField(max_length=255, validators=[REPOSITORY])
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["project", "registry", "repository"]
        constraints = [
            models.UniqueConstraint(fields=["project", "registry", "repository"], name="one_image_rule")
        ]

    def __str__(self) -> str:
        return f"{self.registry}/{self.repository}"


# A StorageClass name is a DNS subdomain: lower-case labels joined by dots.
DNS_SUBDOMAIN = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
    "Use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit.",
)
# A claim the portal creates can be at most this big (1 PiB): a typo (an extra zero or two) is
# a form error, not a request the storage backend may try to honour.
MAX_VOLUME_GIB = 1024 * 1024


class VolumeAccessMode(models.TextChoices):
    """PersistentVolumeClaim access modes, spelled as Kubernetes spells them."""

    READ_WRITE_ONCE = "ReadWriteOnce", "ReadWriteOnce (one node)"
    READ_WRITE_ONCE_POD = "ReadWriteOncePod", "ReadWriteOncePod (one pod)"
    READ_ONLY_MANY = "ReadOnlyMany", "ReadOnlyMany (many nodes, read-only)"
    READ_WRITE_MANY = "ReadWriteMany", "ReadWriteMany (many nodes)"


class ProjectVolume(models.Model):
    """A PersistentVolumeClaim in the project's namespace that its jobs may mount.

    Two kinds: an existing claim (`storage_class` empty: the portal only mounts it), or one the
    portal creates from `storage_class` with `size_gib` and `access_mode` (the namespace reconcile
    makes it; it is never deleted by the portal, so removing the row keeps the data). `phase` and
    `status_message` mirror what the last reconcile saw.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="volumes")
    name = models.CharField(max_length=40, validators=[DNS_LABEL])
    claim_name = models.CharField(max_length=253, validators=[DNS_LABEL])
    read_only = models.BooleanField(default=False, help_text="Jobs can only mount it read-only.")
    storage_class = models.CharField(
        max_length=253,
        blank=True,
        validators=[DNS_SUBDOMAIN],
        help_text="Empty: the claim exists already. Set: the portal creates the claim from this class.",
    )
    size_gib = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_VOLUME_GIB)],
        help_text="Size of the claim the portal creates, in GiB (it can grow later, never shrink).",
    )
    access_mode = models.CharField(
        max_length=20,
        choices=VolumeAccessMode.choices,
        default=VolumeAccessMode.READ_WRITE_ONCE,
        help_text="Access mode of the claim the portal creates.",
    )
    phase = models.CharField(max_length=20, blank=True, editable=False)
    status_message = models.CharField(max_length=300, blank=True, editable=False)
    synced_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="one_volume_name"),
            models.UniqueConstraint(
                fields=["project", "claim_name"],
                condition=~models.Q(storage_class=""),
                name="one_created_claim",
                violation_error_message="Another volume of this project already creates this claim.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project}/{self.name}"

    @property
    def creates_claim(self) -> bool:
        return bool(self.storage_class)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.creates_claim and self.size_gib is None:
            errors["size_gib"] = "A claim the portal creates needs a size."
        if not self.creates_claim and self.size_gib is not None:
            errors["size_gib"] = (
                "Only a claim the portal creates has a size: set a storage class or clear it."
            )
        if self.creates_claim and self.access_mode == VolumeAccessMode.READ_ONLY_MANY and not self.read_only:
            errors["read_only"] = "A ReadOnlyMany claim can only be mounted read-only."
        if errors:
            raise ValidationError(errors)
