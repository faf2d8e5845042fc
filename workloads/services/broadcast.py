"""The one producer of job websocket messages. Called on commit; never fails the caller.

Channel layers are at-most-once, so pages resync over REST when they (re)connect; job state
never depends on a socket message.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from workloads.messages import JobStateMessage, job_group
from workloads.models import Job
from workloads.selectors import queue_summary

log = logging.getLogger(__name__)


def job_message(job: Job) -> JobStateMessage:
    return {
        "type": "job.state",
        "job": str(job.uid),
        "project": job.project.slug,
        "state": job.state,
        "reason": job.state_reason,
        "changed_at": job.state_changed_at.isoformat(),
        "exit_code": job.exit_code,
        "node": job.node,
        "queue": queue_summary(job),
    }


def job_changed(job_id: int) -> None:
    job = Job.objects.select_related("project").filter(pk=job_id).first()
    layer = get_channel_layer()
    if job is None or layer is None:
        return
    try:
        async_to_sync(layer.group_send)(job_group(job.project_id), job_message(job))
    except Exception:
        log.warning("broadcast of job %s failed", job_id, exc_info=True)
