from django.apps import AppConfig


class Config(AppConfig):
    name = "core"

    def ready(self) -> None:
        # In ready(): the database layer loads once the app registry is ready.
        from django.db.backends.signals import connection_created

        from core.db_thread import new_store_vacuums

        connection_created.connect(new_store_vacuums, dispatch_uid="penelope-new-store-vacuums")
