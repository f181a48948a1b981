from django.apps import AppConfig


class CdpConfig(AppConfig):
    name = "cdp"
    verbose_name = "CDP connections"
    default_auto_field = "django.db.models.BigAutoField"
