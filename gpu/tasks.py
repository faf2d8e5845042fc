"""Periodic gpu tasks (Celery beat): partitions, rollups, rollup retention. Thin: one service each."""

from __future__ import annotations

from celery import shared_task

from gpu import retention, services


@shared_task(
    name="gpu.partitions_maintain",
    expires=3000,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def partitions_maintain() -> dict[str, list[str]]:
    return retention.partitions_maintain()


@shared_task(name="gpu.nodes_sweep", expires=50, soft_time_limit=60, time_limit=90, ignore_result=True)
def nodes_sweep() -> int:
    return services.node_sweep()


@shared_task(
    name="gpu.rollup_minutes",
    expires=50,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def rollup_minutes() -> int:
    return retention.rollup_minutes()


@shared_task(
    name="gpu.rollup_hours",
    expires=3000,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def rollup_hours() -> int:
    return retention.rollup_hours()


@shared_task(
    name="gpu.rollups_prune",
    expires=3000,
    soft_time_limit=120,
    time_limit=180,
    ignore_result=True,
)
def rollups_prune() -> int:
    return retention.rollups_prune()
