from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "workloads"
    verbose_name = "GPU jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workloads import metrics, signals  # noqa: F401 - signals connects the receivers

        metrics.register()
