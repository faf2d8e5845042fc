"""Signal receivers; they only enqueue, except that a failed GPU's jobs are preempted with notice at once."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from accounts.models import Project, Quota
from gpu.peaks import PodReading, pod_readings_stored
from gpu.signals import gpu_failed
from workloads.services import peaks
from workloads.services.gpu_failures import jobs_requeue_for_failed_gpu
from workloads.services.publisher import namespace_refresh


@receiver(post_save, sender=Quota, dispatch_uid="workloads.quota_saved")
def quota_saved(sender: type[Quota], instance: Quota, **kwargs: Any) -> None:
    namespace_refresh(instance.project_id)


@receiver(post_save, sender=Project, dispatch_uid="workloads.project_saved")
def project_saved(sender: type[Project], instance: Project, **kwargs: Any) -> None:
    namespace_refresh(instance.pk)


@receiver(gpu_failed, dispatch_uid="workloads.gpu_failed")
def gpu_failed_requeue(
    sender: object, node: str, gpu_uuid: str, reason: str, pods: list[tuple[str, str]], **kwargs: Any
) -> None:
    jobs_requeue_for_failed_gpu(node=node, gpu_uuid=gpu_uuid, reason=reason, pods=pods)


@receiver(pod_readings_stored, dispatch_uid="workloads.pod_readings_stored")
def pod_readings(sender: type[Any], readings: list[PodReading], **kwargs: Any) -> None:
    peaks.record_readings(readings=readings)
