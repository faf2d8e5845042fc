"""Getting reconcile work to the workers: publish after commit, and the Postgres outbox behind it.

`enqueue_reconcile` never raises: when Redis is down the intent is still in `ReconcileOutbox`
(written in the same transaction as the change) and `outbox_dispatch` republishes it later.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from workloads import app_settings
from workloads.models import ReconcileOutbox

log = logging.getLogger(__name__)
PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def enqueue_reconcile(job_id: int) -> bool:
    """Publish one reconcile task; False (logged) when the broker is unreachable."""
    from workloads.tasks import reconcile_job

    try:
        reconcile_job.apply_async((job_id,), retry_policy=PUBLISH_RETRY)
    except Exception:
        log.warning("could not publish reconcile of job %s; the outbox keeps it", job_id, exc_info=True)
        return False
    ReconcileOutbox.objects.filter(job_id=job_id).update(published_at=timezone.now())
    return True


def outbox_write(job_id: int) -> None:
    """Record the intent inside the caller's transaction and publish once it commits."""
    ReconcileOutbox.objects.update_or_create(
        job_id=job_id, defaults={"requested_at": timezone.now(), "published_at": None}
    )
    transaction.on_commit(lambda: enqueue_reconcile(job_id))


def outbox_done(job_id: int) -> None:
    ReconcileOutbox.objects.filter(job_id=job_id).delete()


def outbox_dispatch(limit: int = 500) -> int:
    """Republish rows never published or stale; stops at the first broker failure. Returns count."""
    stale = timezone.now() - timedelta(seconds=app_settings.outbox_retry_s())
    rows = (
        ReconcileOutbox.objects.filter(Q(published_at__isnull=True) | Q(published_at__lt=stale))
        .order_by("requested_at")
        .values_list("job_id", flat=True)[:limit]
    )
    sent = 0
    for job_id in list(rows):
        ReconcileOutbox.objects.filter(job_id=job_id).update(attempts=F("attempts") + 1)
        if not enqueue_reconcile(job_id):
            break
        sent += 1
    return sent
