"""Enumerations of the gpu app, shared by the UI, the admin, the API and the messages."""

from django.db import models


class SharingMode(models.TextChoices):
    EXCLUSIVE = "exclusive", "Exclusive (whole GPU)"
    SHARED = "shared", "Shared (MPS slices)"


class GpuHealth(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    DEGRADED = "degraded", "Degraded (correctable errors)"
    UNHEALTHY = "unhealthy", "Unhealthy (XID or uncorrectable ECC)"
    UNKNOWN = "unknown", "Unknown (no telemetry)"


class GpuEventKind(models.TextChoices):
    XID = "xid", "XID error"
    ECC_SBE = "ecc_sbe", "Correctable ECC errors"
    ECC_DBE = "ecc_dbe", "Uncorrectable ECC errors"
    HEALTH = "health", "Health change"
    SERVICE = "service", "Taken out of / returned to service"
    SHARING = "sharing", "Sharing mode change"


# NVIDIA's application-caused XIDs: a user's bad kernel, not a sick card, so they never mark a GPU unhealthy.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
