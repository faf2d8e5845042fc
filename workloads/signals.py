"""Signal receivers; they only enqueue: a quota or project change re-applies the namespace."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from accounts.models import Project, Quota
from workloads.services.publisher import namespace_refresh


@receiver(post_save, sender=Quota, dispatch_uid="workloads.quota_saved")
def quota_saved(sender: type[Quota], instance: Quota, **kwargs: Any) -> None:
    namespace_refresh(instance.project_id)


@receiver(post_save, sender=Project, dispatch_uid="workloads.project_saved")
def project_saved(sender: type[Project], instance: Project, **kwargs: Any) -> None:
    namespace_refresh(instance.pk)
