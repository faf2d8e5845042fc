"""Daily partitions ahead and behind, and rollups, on the real Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from gpu import retention, storage
from gpu.models import GpuRollup, GpuSample, Resolution
from gpu.storage import SampleRow, partition_name, store
from gpu.tests.factories import decoded, make_gpus, make_node, sample

pytestmark = pytest.mark.django_db


def row(gpu_id: int, ts: datetime, util: int = 40) -> SampleRow:
    return storage.row(gpu_id, decoded(sample("GPU-x", ts, util=util)))


def test_partitions_are_created_ahead_and_dropped_whole_after_retention() -> None:
    (gpu,) = make_gpus(make_node(), 1)
    today = datetime.now(UTC).date()
    store().ensure_partitions(start=today - timedelta(days=4), days=4)
    old = datetime.combine(today - timedelta(days=4), datetime.min.time(), tzinfo=UTC) + timedelta(hours=3)
    assert store().write([row(gpu.pk, old), row(gpu.pk, old + timedelta(days=1))]) == 2
    with override_settings(GPU_RAW_RETENTION_DAYS=2, GPU_PARTITIONS_AHEAD_DAYS=2):
        result = retention.partitions_maintain()
    assert result["dropped"] == [
        partition_name(today - timedelta(days=4)),
        partition_name(today - timedelta(days=3)),
    ]
    names = store().partitions()
    for ahead in range(3):
        assert partition_name(today + timedelta(days=ahead)) in names
    assert partition_name(today - timedelta(days=3)) not in names
    assert GpuSample.objects.count() == 0


def test_a_batch_for_a_day_without_partition_creates_it() -> None:
    (gpu,) = make_gpus(make_node(), 1)
    future = datetime.now(UTC) + timedelta(days=9)
    assert store().write([row(gpu.pk, future)]) == 1
    assert partition_name(future.date()) in store().partitions()


def test_a_retried_batch_reaching_into_a_new_day_stores_only_its_new_rows() -> None:
    """The COPY meets a stored row before the row of a day without partition (Postgres routes each
    row at once but inserts them in buffers of 1,000, so the stored rows must fill one): the merge
    makes the partition and keeps the new rows."""
    (gpu,) = make_gpus(make_node(), 1)
    first = datetime.now(UTC) + timedelta(days=12)
    stored = [row(gpu.pk, first + timedelta(seconds=i)) for i in range(1100)]
    assert store().write(stored) == 1100
    later = first + timedelta(days=1)
    assert store().write([*stored, row(gpu.pk, later)]) == 1
    assert partition_name(later.date()) in store().partitions()
    assert GpuSample.objects.filter(gpu_id=gpu.pk).count() == 1101


def test_minute_and_hour_rollups_are_upserted_idempotently() -> None:
    (gpu,) = make_gpus(make_node(), 1)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(minutes=2)
    store().write([row(gpu.pk, start + timedelta(seconds=i), util=i % 100) for i in range(120)])
    assert retention.rollup_minutes(now=now) == 2
    assert retention.rollup_minutes(now=now) == 2  # a second run rewrites the same rows
    minutes = GpuRollup.objects.filter(resolution=Resolution.MINUTE).order_by("bucket")
    assert [m.samples for m in minutes] == [60, 60]
    assert minutes[0].util_max == 59
    retention.rollup_hours(now=now + timedelta(hours=1))
    assert GpuRollup.objects.filter(resolution=Resolution.HOUR).count() >= 1


def test_old_rollups_are_pruned() -> None:
    (gpu,) = make_gpus(make_node(), 1)
    old = datetime.now(UTC) - timedelta(days=400)
    GpuRollup.objects.create(
        gpu=gpu,
        resolution=Resolution.HOUR,
        bucket=old,
        samples=1,
        util_avg=1,
        util_max=1,
        mem_used_avg=1,
        mem_used_max=1,
        temp_max=1,
        power_avg=1,
    )
    assert retention.rollups_prune() == 1
