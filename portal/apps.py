from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        # Every process that runs Django sends tasks (by name, through celery's current app): make
        # the portal's configured app the current one before anything is sent.
        from portal import celery  # noqa: F401
        from portal.dbtypes import use_fast_timestamps

        # Every process reads timestamps: read them with the C parser (portal.dbtypes).
        connection_created.connect(use_fast_timestamps, dispatch_uid="portal.dbtypes")
