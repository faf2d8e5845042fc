"""The one producer of job websocket messages. Called on commit; never fails the caller.

Channel layers are at-most-once, so a page's socket sends the current state of the jobs it shows
whenever it (re)connects (`selectors.job_state_snapshot`); job state never depends on a socket message.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from workloads.messages import JobStateMessage, job_group
from workloads.models import Job
from workloads.selectors import job_state_message

log = logging.getLogger(__name__)


def job_changed(job_id: int) -> None:
    jobs_changed([job_id])


def jobs_changed(job_ids: Collection[int]) -> None:
    """Several jobs' messages (an admission cycle's changed explanations) in one query and one trip
    to the channel layer: from sync code each trip starts an event loop and, on the pub/sub layer,
    a Redis connection of its own; one trip per job cost a third of the controller's CPU under the
    load test (py-spy)."""
    layer = get_channel_layer()
    if not job_ids or layer is None:
        return
    jobs = Job.objects.select_related("project").filter(pk__in=list(job_ids)).order_by("pk")
    sends = [(job_group(job.project_id), job_state_message(job)) for job in jobs]
    try:
        async_to_sync(_send_all)(layer, sends)
    except Exception:
        log.warning("broadcast of jobs %s failed", sorted(job_ids)[:10], exc_info=True)


async def _send_all(layer: Any, sends: list[tuple[str, JobStateMessage]]) -> None:
    for group, message in sends:
        await layer.group_send(group, message)
