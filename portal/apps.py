from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        # Every process that runs Django sends tasks (by name, through celery's current app): make
        # the portal's configured app the current one before anything is sent.
        from portal import celery  # noqa: F401
