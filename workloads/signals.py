"""Signals only enqueue (style rule 5): a quota or project change re-applies the namespace."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from accounts.models import Project, Quota

log = logging.getLogger(__name__)


def _enqueue_namespace(project_id: int) -> None:
    from workloads.tasks import reconcile_namespace

    try:
        reconcile_namespace.delay(project_id)
    except Exception:
        log.warning("could not enqueue namespace reconcile of project %s", project_id, exc_info=True)


def namespace_refresh(project_id: int) -> None:
    """After commit, re-apply the project's namespace (its ResourceQuota follows grants and borrowing)."""
    transaction.on_commit(lambda: _enqueue_namespace(project_id))


@receiver(post_save, sender=Quota, dispatch_uid="workloads.quota_saved")
def quota_saved(sender: type[Quota], instance: Quota, **kwargs: Any) -> None:
    project_id = instance.project_id
    transaction.on_commit(lambda: _enqueue_namespace(project_id))


@receiver(post_save, sender=Project, dispatch_uid="workloads.project_saved")
def project_saved(sender: type[Project], instance: Project, **kwargs: Any) -> None:
    project_id = instance.pk
    transaction.on_commit(lambda: _enqueue_namespace(project_id))
