"""Raw-sample partitions ahead and behind, and the 1-minute / 1-hour rollups (services for tasks.py).

Rollups are recomputed over a trailing window and upserted, so a late batch or a task that ran
twice only rewrites the same rows. Raw data leaves by whole partitions (storage.drop_before);
rollups, which are 60x and 3600x smaller, leave by a DELETE on their indexed bucket.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, Max
from django.db.models.functions import TruncHour, TruncMinute
from django.utils import timezone

from gpu import app_settings
from gpu.models import GpuRollup, GpuSample, Resolution
from gpu.storage import store

ROLLUP_FIELDS = ["samples", "util_avg", "util_max", "mem_used_avg", "mem_used_max", "temp_max", "power_avg"]


def partitions_maintain(*, now: datetime | None = None) -> dict[str, list[str]]:
    """Create today's and the next days' partitions; drop those past the raw retention."""
    today = (now or timezone.now()).date()
    created = store().ensure_partitions(start=today, days=app_settings.partitions_ahead_days() + 1)
    dropped = store().drop_before(day=today - timedelta(days=app_settings.raw_retention_days()))
    return {"created": created, "dropped": dropped}


def _upsert(rows: Iterable[dict[str, Any]], resolution: Resolution, *, key: str) -> int:
    objects = [
        GpuRollup(
            gpu_id=row["gpu_id"],
            resolution=resolution,
            bucket=row[key],
            samples=row["n"],
            util_avg=row["u_avg"],
            util_max=row["u_max"],
            mem_used_avg=row["m_avg"],
            mem_used_max=row["m_max"],
            temp_max=row["t_max"],
            power_avg=row["p_avg"],
        )
        for row in rows
    ]
    GpuRollup.objects.bulk_create(
        objects,
        update_conflicts=True,
        unique_fields=["gpu", "resolution", "bucket"],
        update_fields=ROLLUP_FIELDS,
    )
    return len(objects)


def rollup_minutes(*, now: datetime | None = None, window: timedelta = timedelta(minutes=5)) -> int:
    """Upsert the 1-minute rollups of the last complete minutes."""
    end = (now or timezone.now()).replace(second=0, microsecond=0)
    rows = (
        GpuSample.objects.filter(ts__gte=end - window, ts__lt=end)
        .annotate(bucket=TruncMinute("ts"))
        .values("gpu_id", "bucket")
        .annotate(
            n=Count("ts"),
            u_avg=Avg("util_gpu"),
            u_max=Max("util_gpu"),
            m_avg=Avg("mem_used_mib"),
            m_max=Max("mem_used_mib"),
            t_max=Max("temp_c"),
            p_avg=Avg("power_w"),
        )
    )
    return _upsert(rows, Resolution.MINUTE, key="bucket")


def rollup_hours(*, now: datetime | None = None, window: timedelta = timedelta(hours=2)) -> int:
    """Upsert the 1-hour rollups from the 1-minute ones (averages of minute averages)."""
    end = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    minutes = GpuRollup.objects.filter(resolution=Resolution.MINUTE, bucket__gte=end - window, bucket__lt=end)
    rows = (
        minutes.annotate(hour=TruncHour("bucket"))
        .values("gpu_id", "hour")
        .annotate(
            n=Count("id"),
            u_avg=Avg("util_avg"),
            u_max=Max("util_max"),
            m_avg=Avg("mem_used_avg"),
            m_max=Max("mem_used_max"),
            t_max=Max("temp_max"),
            p_avg=Avg("power_avg"),
        )
    )
    return _upsert(rows, Resolution.HOUR, key="hour")


def rollups_prune(*, now: datetime | None = None) -> int:
    now = now or timezone.now()
    minute_cut = now - timedelta(days=app_settings.rollup_minute_retention_days())
    hour_cut = now - timedelta(days=app_settings.rollup_hour_retention_days())
    deleted, _ = GpuRollup.objects.filter(resolution=Resolution.MINUTE, bucket__lt=minute_cut).delete()
    more, _ = GpuRollup.objects.filter(resolution=Resolution.HOUR, bucket__lt=hour_cut).delete()
    return deleted + more
