from django.apps import AppConfig


class GpuConfig(AppConfig):
    name = "gpu"
    verbose_name = "Nodes and GPUs"
    default_auto_field = "django.db.models.BigAutoField"
