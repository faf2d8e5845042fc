"""The Celery app. Tasks are thin and id-keyed; the broker is Redis in production, memory embedded."""

import os
from typing import Any

from celery import Celery, Task, signals
from django.db import close_old_connections

from portal.gcfreeze import freeze_startup_objects
from portal.liveness import Heartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal", amqp="portal.broker:PortalAMQP")  # reconnects within 2 s of the broker's return
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.steps["consumer"].add(Heartbeat)  # the liveness file; a no-op unless GPUPORTAL_WORKER_ALIVE_FILE is set


@signals.worker_init.connect
@signals.worker_process_init.connect
def freeze_at_start(**kwargs: Any) -> None:
    """The main process before it forks its pool, and each pool process (portal/gcfreeze.py)."""
    freeze_startup_objects()


@signals.task_prerun.connect
@signals.task_postrun.connect
def close_spent_connections(sender: Task[Any, Any], **kwargs: Any) -> None:
    """Around each task as Django does around each request: close a connection past CONN_MAX_AGE or
    left broken, keep the rest (settings.CELERY_DB_REUSE_MAX stops Celery closing them all). Not for
    eager tasks: they run inside the caller's transaction."""
    if not getattr(sender.request, "is_eager", False):
        close_old_connections()
