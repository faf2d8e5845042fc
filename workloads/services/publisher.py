"""The one way work leaves a transaction: Celery tasks sent by name after commit, and the outbox.

Every writer that wants a worker to act calls this module; nothing below the task layer imports
`workloads.tasks`. Sending never raises: a broker outage is logged, and for job reconciles the
intent is still in `ReconcileOutbox` (written in the same transaction as the change), which
`outbox_dispatch` republishes later. Other tasks are repaired by the periodic sweeps.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from workloads import app_settings
from workloads.choices import TaskName
from workloads.models import ReconcileOutbox

log = logging.getLogger(__name__)
# One quick retry: a request thread must not hang on a broker that is down.
PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def send(name: str, *args: Any, retries: int = 1, expires: float | None = None) -> bool:
    """Publish one task by name now; False (logged) when the broker is unreachable.

    `retries=0` for hot paths (the controller's watch handlers), which the sweep backs up anyway.
    `expires`: seconds after which a worker drops the message unrun (a newer one will exist)."""
    policy = {**PUBLISH_RETRY, "max_retries": retries}
    try:
        current_app.send_task(str(name), args=list(args), retry=True, retry_policy=policy, expires=expires)
    except Exception:
        log.warning("could not publish %s%r (broker down?)", name, args, exc_info=True)
        return False
    return True


def send_on_commit(name: str, *args: Any) -> None:
    """Publish once the caller's transaction commits (at once outside a transaction)."""
    transaction.on_commit(lambda: send(name, *args))


def namespace_refresh(project_id: int) -> None:
    """Re-apply the project's namespace after commit (its ResourceQuota follows grants and borrowing)."""
    send_on_commit(TaskName.RECONCILE_NAMESPACE, project_id)


def job_notify(job_id: int, kind: str) -> None:
    """Tell the job's owner (email) after commit; `kind` completes "your job ... <kind>"."""
    send_on_commit(TaskName.NOTIFY_JOB, job_id, kind)


def enqueue_reconcile(job_id: int, *, written: bool = False) -> bool:
    """Publish one job reconcile now and mark its outbox row published; False when the broker is down.

    At most one message per job waits in the queue: while one is pending (sent, not yet started) the
    sweep, the outbox and new writes add none, since that run reads the rows when it starts. Not sent
    again either while the job's request was published less than the outbox retry ago. Each message
    expires after a few sweep intervals (and its pending mark with it), so a backed-up queue drains
    stale copies unrun; the sweep and the outbox send a fresh one.
    `written`: the caller's transaction has just cleared the row's published_at (outbox_write), so
    the recent-publish check would only read that back."""
    fresh = timezone.now() - timedelta(seconds=app_settings.outbox_retry_s())
    if not written and ReconcileOutbox.objects.filter(job_id=job_id, published_at__gte=fresh).exists():
        return True
    expires = app_settings.reconcile_expires_s()
    if not _mark_pending(job_id, expires):
        return True  # that queued message answers this request too
    if not send(TaskName.RECONCILE_JOB, job_id, expires=expires):
        _clear_pending(job_id)
        return False
    ReconcileOutbox.objects.filter(job_id=job_id).update(published_at=timezone.now())
    return True


def reconcile_started(job_id: int) -> None:
    """A worker took the job's reconcile: a change from now on needs a message of its own."""
    _clear_pending(job_id)


def enqueue_reconcile_uid(uid: str) -> bool:
    """The controller's publish for a watched change of a job's Job or pods (keyed by the label's
    uid: the controller reads no rows). As for `enqueue_reconcile`, at most one such message per job
    waits: a burst of pod and Job events while one is queued adds none, since that run reads the
    cluster when it starts. One try (a watch handler never waits on a broker); the sweep backs it up."""
    expires = app_settings.reconcile_expires_s()
    if not _mark_pending(f"uid:{uid}", expires):
        return True
    if not send(TaskName.RECONCILE_JOB_UID, uid, retries=0, expires=expires):
        _clear_pending(f"uid:{uid}")
        return False
    return True


def reconcile_uid_started(uid: str) -> None:
    """A worker took a watch-driven reconcile: the next change needs a message of its own."""
    _clear_pending(f"uid:{uid}")


PENDING_PREFIX = "workloads:reconcile-pending"


def _pending_key(key: int | str) -> str:
    # Keyed by database too: two portals (or two test runs) may share one Redis and reuse job ids.
    return f"{PENDING_PREFIX}:{connection.settings_dict['NAME']}:{key}"


def _mark_pending(key: int | str, expires: float) -> bool:
    """True when no reconcile of the job is pending (now one is); the cache is shared by all processes."""
    try:
        return bool(cache.add(_pending_key(key), 1, timeout=expires))
    except Exception:  # the cache is the broker's Redis: sending will say whether it is down
        return True


def _clear_pending(key: int | str) -> None:
    try:
        cache.delete(_pending_key(key))
    except Exception:
        log.warning("could not clear the pending reconcile of job %s (Redis down?)", key)


def outbox_write(job_id: int) -> None:
    """Record the intent inside the caller's transaction and publish once it commits."""
    # One upsert: update_or_create locked, then inserted between two savepoints (six statements).
    row = ReconcileOutbox(job_id=job_id, requested_at=timezone.now(), published_at=None)
    ReconcileOutbox.objects.bulk_create(
        [row], update_conflicts=True, unique_fields=["job"], update_fields=["requested_at", "published_at"]
    )
    transaction.on_commit(lambda: enqueue_reconcile(job_id, written=True))


def outbox_seen(job_id: int) -> datetime | None:
    """When the pending request for this job was written (None: nothing pending). A reconcile reads
    it before it starts, and clears only that much when it is done."""
    return ReconcileOutbox.objects.filter(job_id=job_id).values_list("requested_at", flat=True).first()


def outbox_done(job_id: int, *, seen: datetime | None) -> None:
    """The reconcile that read `seen` is done: clear the request it saw, and keep one written since
    (a cancel that arrived while it ran must still get its own reconcile)."""
    if seen is not None:
        ReconcileOutbox.objects.filter(job_id=job_id, requested_at__lte=seen).delete()


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
