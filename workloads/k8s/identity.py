"""Who a job is, as its Kubernetes objects say it: the identity every builder of a job's objects
takes, its labels, and the owner reference that ties an object to the job's Kubernetes Job."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from plugin.names import MANAGER
from workloads import app_settings
from workloads.k8s.labels import MANAGED_BY, PROJECT_LABEL, UID_LABEL
from workloads.models import Job

JSON = dict[str, Any]


@dataclass(frozen=True)
class JobIdentity:
    """What a job's manifest needs besides its spec: who it is and where the queue put it."""

    uid: uuid.UUID
    name: str  # the Kubernetes Job's name, from the uid (Job.k8s_name)
    namespace: str
    project: str  # the project's slug
    posix_id: int  # the project's own UID and GID in the pod
    planned_node: str = ""  # the node the queue placed it on; "" before admission


def job_identity(job: Job) -> JobIdentity:
    return JobIdentity(
        uid=job.uid,
        name=job.k8s_name,
        namespace=job.namespace,
        project=job.project.slug,
        posix_id=app_settings.project_posix_id(job.project_id),
        planned_node=job.planned_node,
    )


def job_labels(ids: JobIdentity) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, UID_LABEL: str(ids.uid), PROJECT_LABEL: ids.project}


def owned_by(job: JSON) -> list[JSON]:
    """An owner reference to the job's Kubernetes Job: what it owns goes when the Job goes (its TTL,
    a cancel)."""
    meta = job["metadata"]
    return [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"]}]
