"""What ingest reads and writes outside the samples, against the real Postgres: the node's GPUs it
reads carry every field as stored, in index order, and the `last_seen` stamps are written when due,
both in one statement, and not again within LAST_SEEN_EVERY."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from gpu.choices import GpuHealth, SharingMode
from gpu.health import LAST_SEEN_EVERY
from gpu.ingest import _node_gpus, ingest_batch
from gpu.models import Gpu, Node
from gpu.tests.factories import batch, make_gpus, make_node, series

pytestmark = pytest.mark.django_db(transaction=True)


def _ingest(node: Node, start: datetime) -> list[str]:
    """The UPDATE statements one batch (3 s of both GPUs) sent."""
    samples = series(f"GPU-{node.name}-0", 3, start=start) + series(f"GPU-{node.name}-1", 3, start=start)
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        ingest_batch(node=node, raw=json.dumps(batch(node.name, samples)).encode())
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith(("UPDATE", "WITH"))]


def test_the_gpus_ingest_reads_equal_the_orms() -> None:
    node = make_node(gpus=2)
    a, b = make_gpus(node, 2)
    seen = datetime(2026, 12, 5, 10, 0, tzinfo=UTC)
    Gpu.objects.filter(pk=a.pk).update(
        sharing_mode=SharingMode.SHARED,
        slices=4,
        cross_project=True,
        in_service=False,
        health=GpuHealth.DEGRADED,
        ecc_sbe=3,
        last_bad_at=seen,
        last_seen=seen,
        health_reason="ECC",
    )
    read = _node_gpus(node)
    for gpu in Gpu.objects.filter(node=node):
        fields = [f.attname for f in Gpu._meta.concrete_fields]
        got = {f: getattr(read[gpu.uuid], f) for f in fields}
        assert got == {f: getattr(gpu, f) for f in fields}
        assert type(got["cross_project"]) is bool
        assert type(got["in_service"]) is bool
    stamp = read[a.uuid].last_seen
    assert stamp == seen
    assert stamp is not None
    assert stamp.utcoffset() == timedelta(0)
    assert list(read) == [a.uuid, b.uuid]  # by index


def test_last_seen_is_stamped_in_one_statement_when_due_and_not_again_within_the_interval() -> None:
    node = make_node(gpus=2)
    make_gpus(node, 2)
    Gpu.objects.update(health=GpuHealth.HEALTHY)  # known GPUs: no health change to save with them
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    updates = _ingest(node, start)
    assert len(updates) == 1, updates
    assert "gpu_gpu" in updates[0]
    assert "gpu_node" in updates[0]
    node.refresh_from_db()
    assert node.last_seen is not None
    stamps = set(Gpu.objects.filter(node=node).values_list("last_seen", flat=True))
    assert stamps == {start + timedelta(seconds=2)}  # the batch's newest sample

    assert _ingest(node, start + timedelta(seconds=3)) == []  # 3 s later: nothing due
    later = start + LAST_SEEN_EVERY + timedelta(seconds=3)
    updates = _ingest(node, later)  # the GPUs are due again; the node (stamped by the clock) is not
    assert len(updates) == 1, updates
    assert "gpu_node" not in updates[0]
    stamps = set(Gpu.objects.filter(node=node).values_list("last_seen", flat=True))
    assert stamps == {later + timedelta(seconds=2)}
