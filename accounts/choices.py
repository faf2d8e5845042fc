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
