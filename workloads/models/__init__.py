"""The workloads app's models, a module per concern: the job and its timeline (`job`), the
reconcile's bookkeeping (`reconcile`), quota grants (`grants`), the queue settings (`queue_settings`)
and a project's job configuration: templates, image rules and volumes (`project`). Fields,
constraints and single-row computation only: no I/O, so every write path is a service and every
read a selector."""

from workloads.models.grants import GrantStatus, QuotaGrant
from workloads.models.job import Job, JobEvent, QueuedJob
from workloads.models.project import ImageRule, JobTemplate, ProjectVolume, VolumeAccessMode
from workloads.models.queue_settings import QueueSettings
from workloads.models.reconcile import OrphanReport, ReconcileOutbox

__all__ = [
    "GrantStatus",
    "ImageRule",
    "Job",
    "JobEvent",
    "JobTemplate",
    "OrphanReport",
    "ProjectVolume",
    "QueueSettings",
    "QueuedJob",
    "QuotaGrant",
    "ReconcileOutbox",
    "VolumeAccessMode",
]
