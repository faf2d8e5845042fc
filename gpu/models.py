"""Nodes and GPUs mirrored from the cluster, their events, node agent tokens and telemetry tables.

Fields, constraints and single-row computation only; writes live in services.py and ingest.py.
Raw samples live in `gpu_sample`, which the migration creates by hand (range-partitioned by day on
Postgres, a plain table on SQLite), so `GpuSample` is unmanaged and only used for reads.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from gpu.choices import GpuEventKind, GpuHealth, SharingMode
from gpu.messages import GpuFacts
from plugin.names import GPU_COUNT_LABEL, GPU_RESOURCE


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


class Node(models.Model):
    """A Kubernetes Node as last seen by the watch; `desired_cordoned` is the operators' intent."""

    name = models.CharField(max_length=253, unique=True)
    uid = models.CharField(max_length=64, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    capacity = models.JSONField(default=dict, blank=True)
    allocatable = models.JSONField(default=dict, blank=True)
    conditions = models.JSONField(default=list, blank=True)
    cordoned = models.BooleanField(default=False, help_text="spec.unschedulable as the cluster has it.")
    desired_cordoned = models.BooleanField(
        null=True, blank=True, help_text="What operators asked for; empty means no opinion."
    )
    gpu_model = models.CharField(max_length=120, blank=True)
    held_for = models.CharField(
        max_length=200,
        blank=True,
        help_text="Held for a waiting job of several workers (project/job), as the last admission "
        "cycle chose.",
    )
    gpu_count = models.PositiveIntegerField(default=0)
    health_cordoned = models.BooleanField(
        default=False,
        help_text="Cordoned by the portal because every GPU of it is out; lifted when one returns.",
    )
    resource_version = models.CharField(max_length=32, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True, help_text="Last telemetry from its agent.")
    synced_at = models.DateTimeField(null=True, blank=True, help_text="Last change seen by the watch.")
    deleted = models.BooleanField(default=False)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_ready(self) -> bool:
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in self.conditions)

    @property
    def needs_cordon_change(self) -> bool:
        return self.desired_cordoned is not None and self.desired_cordoned != self.cordoned

    def gpu_allowance(self, *, shared: int) -> int:
        """How many GPUs this node's agent may report, by what Kubernetes says of the node: its whole
        GPUs (`nvidia.com/gpu`, the larger of capacity and allocatable, since an unhealthy GPU leaves
        allocatable but still reports telemetry) plus the `shared` GPUs already known, which the
        plugin advertises as MPS slices instead; or GPU feature discovery's count label if larger."""
        whole = max(_count(self.allocatable.get(GPU_RESOURCE)), _count(self.capacity.get(GPU_RESOURCE)))
        return max(whole + shared, _count(self.labels.get(GPU_COUNT_LABEL)))


class Gpu(models.Model):
    """One physical GPU, known by its UUID; sharing mode and service flag are the operators' intent."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=120, blank=True)
    memory_mib = models.PositiveIntegerField(default=0)
    sharing_mode = models.CharField(max_length=16, choices=SharingMode.choices, default=SharingMode.EXCLUSIVE)
    slices = models.PositiveSmallIntegerField(default=1, help_text="MPS slices when shared (1..48).")
    cross_project = models.BooleanField(
        default=False,
        help_text="Shared GPU only: slices of several projects at once. Weaker isolation: they share "
        "the GPU's /dev/shm and MPS daemon, and MPS runs their servers in turn (operator guide, Security).",
    )
    health = models.CharField(max_length=16, choices=GpuHealth.choices, default=GpuHealth.UNKNOWN)
    in_service = models.BooleanField(default=True, help_text="Out of service: the plugin stops offering it.")
    ecc_sbe = models.PositiveBigIntegerField(default=0, help_text="Last correctable ECC count reported.")
    ecc_dbe = models.PositiveBigIntegerField(default=0, help_text="Last uncorrectable ECC count reported.")
    last_bad_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Last critical XID, ECC error or forced fault; the clean interval runs from it.",
    )
    health_reason = models.CharField(max_length=300, blank=True, help_text="Why the GPU is not healthy.")
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="one_gpu_per_node_index")]
        # Every job's GPU-hours read the shared GPUs' slice counts (accounting.slice_plan), once per
        # API request: from this index they cost Postgres 0.1 ms, not a scan of every GPU (0.4 ms at
        # 4,000 GPUs, and growing with the fleet).
        indexes = [
            models.Index(
                fields=["node", "index"],
                condition=models.Q(sharing_mode=SharingMode.SHARED),
                name="gpu_shared",
            )
        ]

    def __str__(self) -> str:
        return f"{self.node.name}/{self.index}"

    @property
    def isolation(self) -> str:
        """How a shared GPU separates tenants, in the admin's words."""
        if self.sharing_mode != SharingMode.SHARED:
            return "whole GPU"
        return "cross-project (weaker)" if self.cross_project else "one project at a time"

    @property
    def offered(self) -> bool:
        """Whether the plugin may hand it out: in service and not unhealthy (docs/operator-guide.md)."""
        return self.in_service and self.health != GpuHealth.UNHEALTHY

    @property
    def plugin_entry(self) -> dict[str, Any]:
        """This GPU's entry in the plugin's sharing config: {"mode", "slices"}, plus the service and
        cross-project flags."""
        entry: dict[str, Any] = {"mode": "exclusive"}
        if self.sharing_mode == SharingMode.SHARED:
            entry = {"mode": "shared", "slices": int(self.slices)}
            if self.cross_project:
                entry["cross_project"] = True
        if not self.offered:
            entry["in_service"] = False
        return entry

    def frame_facts(self, node: str) -> GpuFacts:
        """What this GPU's live frame says beside its sample (gpu/frames.py); `node` its node's name."""
        return GpuFacts(
            uuid=self.uuid,
            node=node,
            index=self.index,
            health=self.health,
            sharing_mode=self.sharing_mode,
            in_service=self.in_service,
        )


class GpuEvent(models.Model):
    """Something that happened to a GPU: an XID, new ECC errors, a health or service change."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=GpuEventKind.choices)
    ts = models.DateTimeField(default=timezone.now, db_index=True)
    xid = models.IntegerField(null=True, blank=True)
    value = models.BigIntegerField(null=True, blank=True)
    message = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-ts", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["gpu", "kind", "ts"], name="one_gpu_event_per_kind_and_ts")
        ]

    def __str__(self) -> str:
        return f"{self.gpu} {self.kind} at {self.ts:%Y-%m-%d %H:%M:%S}"


class NodeToken(models.Model):
    """A node agent's credential: writes telemetry for its own node only. SHA-256 digest at rest."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=80, default="agent")
    prefix = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()

    class Meta:
        ordering = ["node__name", "-created_at"]

    def __str__(self) -> str:
        return f"{self.node.name}: {self.name} ({self.prefix}…)"

    def is_usable(self) -> bool:
        return self.revoked_at is None and self.expires_at > timezone.now() and not self.node.deleted


class GpuSample(models.Model):
    """One raw telemetry sample (read-only model over the hand-made, partitioned `gpu_sample`)."""

    pk = models.CompositePrimaryKey("gpu_id", "ts")
    gpu_id = models.BigIntegerField()
    ts = models.DateTimeField()
    util_gpu = models.SmallIntegerField()
    util_mem = models.SmallIntegerField()
    mem_used_mib = models.IntegerField()
    mem_total_mib = models.IntegerField()
    temp_c = models.FloatField()
    power_w = models.FloatField()
    sm_clock_mhz = models.IntegerField()
    mem_clock_mhz = models.IntegerField()
    ecc_sbe = models.BigIntegerField()
    ecc_dbe = models.BigIntegerField()
    xid = models.IntegerField(null=True)
    processes = models.JSONField(null=True)

    class Meta:
        managed = False
        db_table = "gpu_sample"

    def __str__(self) -> str:
        return f"GPU {self.gpu_id} at {self.ts:%Y-%m-%d %H:%M:%S}"


class Resolution(models.TextChoices):
    MINUTE = "1m", "1 minute"
    HOUR = "1h", "1 hour"


class GpuRollup(models.Model):
    """Aggregates of raw samples per GPU and bucket; kept for months while raw rows are dropped."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="rollups")
    resolution = models.CharField(max_length=4, choices=Resolution.choices)
    bucket = models.DateTimeField()
    samples = models.PositiveIntegerField()
    util_avg = models.FloatField()
    util_max = models.SmallIntegerField()
    mem_used_avg = models.FloatField()
    mem_used_max = models.IntegerField()
    temp_max = models.FloatField()
    power_avg = models.FloatField()

    class Meta:
        ordering = ["gpu", "resolution", "bucket"]
        constraints = [
            models.UniqueConstraint(fields=["gpu", "resolution", "bucket"], name="one_rollup_per_bucket")
        ]
        indexes = [models.Index(fields=["resolution", "bucket"])]

    def __str__(self) -> str:
        return f"{self.gpu} {self.resolution} {self.bucket:%Y-%m-%d %H:%M}"
