"""Enumerations shared by the UI, the admin and the API."""

from django.db import models


class Role(models.TextChoices):
    MANAGER = "manager", "Manager"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class TokenScope(models.TextChoices):
    READ = "read", "Read"
    SUBMIT = "submit", "Submit jobs"
    ADMIN = "admin", "Manage memberships and tokens"


# Which roles may do what inside a project.
ROLES_THAT_SUBMIT = frozenset({Role.MANAGER, Role.MEMBER})
ROLES_THAT_MANAGE = frozenset({Role.MANAGER})


class TaskName(models.TextChoices):
    """The accounts app's Celery tasks, by the name they are registered and sent under."""

    DELIVER_WEBHOOK = "accounts.deliver_webhook", "Deliver one webhook event"


class NotifyEvent(models.TextChoices):
    """The kinds of job event a user chooses to be emailed about (a project's webhook gets them all)."""

    STARTED = "started", "My job starts"
    FINISHED = "finished", "My job finishes"
    FAILED = "failed", "My job fails or is lost"
    PREEMPTION = "preemption", "My job is given a preemption notice, or preempted"
    IDLE = "idle", "My job's GPUs are idle (a warning, then a suspension)"
    GPU_REQUEUE = "gpu_requeue", "My job is requeued because its GPU failed"
