"""ws/jobs/<uid>/telemetry/: one job's own GPU telemetry, right on shared GPUs too.

Authorised in `connect()` through `workloads.selectors.job_get`, so a job of a project the user is
not in does not exist for them (the socket is refused). It joins the tenant-namespace group that
gpu/broadcast.py fills and keeps only GPUs running this job's pods (`job-<uid>-*`), with only this
job's processes: on an MPS-shared GPU the panel shows the job's own memory next to the GPU totals.
"""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from django.http import Http404

from accounts.models import User
from gpu import broadcast, selectors
from gpu.consumers import LiveGpuConsumer
from gpu.messages import GpuFrame, GroupMessage, SamplesMessage
from workloads.models import Job
from workloads.selectors import job_get


def _job_for(user: User, uid: str) -> Job | None:
    try:
        return job_get(user=user, uid=uid)
    except Http404:
        return None


def job_frames(gpus: dict[str, GpuFrame], *, namespace: str, pod_prefix: str) -> dict[str, GpuFrame]:
    """Frames of GPUs that run one of the job's pods, each with only the job's processes (pure)."""
    out: dict[str, GpuFrame] = {}
    for uuid, frame in gpus.items():
        own = [
            p
            for p in frame["processes"]
            if p["pod_namespace"] == namespace and (p["pod_name"] or "").startswith(pod_prefix)
        ]
        if own:
            out[uuid] = {**frame, "processes": own}
    return out


class JobTelemetryConsumer(LiveGpuConsumer):
    async def authorise(self) -> str | None:
        uid = str(self.scope["url_route"]["kwargs"]["uid"])
        job = await database_sync_to_async(_job_for)(self.user, uid)
        if job is None:
            return None
        self.job_namespace, self.pod_prefix, self.job_node = job.namespace, f"{job.k8s_name}-", job.node
        return broadcast.namespace_group(job.namespace)

    def visible(self, gpus: dict[str, GpuFrame]) -> dict[str, GpuFrame]:
        return job_frames(gpus, namespace=self.job_namespace, pod_prefix=self.pod_prefix)

    def snapshot(self) -> list[GroupMessage]:
        if not self.job_node:
            return []
        gpus = list(selectors.gpu_list().filter(node__name=self.job_node))
        frames = self.visible(selectors.latest_frames(gpus=gpus))
        return [SamplesMessage(type="gpu.samples", gpus=frames, sent_at=0.0)]


def routes() -> list[Any]:
    from django.urls import path

    return [path("ws/jobs/<uuid:uid>/telemetry/", JobTelemetryConsumer.as_asgi())]
