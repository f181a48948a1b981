from django.apps import AppConfig


class Config(AppConfig):
    name = "jobs"

    def ready(self) -> None:
        # The plugin route knows jobs only through this hook.
        from jobs.service import JobHook
        from plugins import views

        views.job_hook = JobHook()
