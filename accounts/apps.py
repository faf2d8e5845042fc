from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and projects"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts import checks, signals  # noqa: F401 - registers the deployment checks and receivers
