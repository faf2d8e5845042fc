from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "workloads"
    verbose_name = "GPU jobs"
    default_auto_field = "django.db.models.BigAutoField"
