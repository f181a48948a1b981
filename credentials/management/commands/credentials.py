"""`manage.py credentials rotate-key`: seal every credential with a new key.

With the store's key file (no CREDENTIALS_KEY), it runs beside a worker: the
worker reads the key files at each use (credentials/rotation.py says how
each step stays safe), and a rotation that stopped is taken up again by the
next one. With CREDENTIALS_KEY, the new key is CREDENTIALS_NEW_KEY; the
worker, which knows only the key its environment gave it, must be stopped,
so the command holds the store's lock as `recover_jobs` does. It says how
many credentials it re-sealed, never a key.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core import store_lock
from credentials import rotation


class Command(BaseCommand):
    help = (
        "rotate-key: seal every credential with a new key (the store's key file at once, beside a worker; with "
        "CREDENTIALS_KEY set, with CREDENTIALS_NEW_KEY, the worker stopped). It never prints a key."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["rotate-key"])

    def handle(self, *args, action: str, **options):
        try:
            if settings.CREDENTIALS_KEY:
                self.rotate_environment_key()
            elif settings.CREDENTIALS_NEW_KEY:
                raise CommandError(
                    "CREDENTIALS_NEW_KEY is for a rotation of CREDENTIALS_KEY, which is not set: the store's key "
                    "file is rotated with a key the command makes. Unset CREDENTIALS_NEW_KEY."
                )
            else:
                self.rotate_key_file()
        except rotation.RotationCannotRun as refused:
            raise CommandError(refused.message) from None

    def rotate_key_file(self) -> None:
        resealed, resumed = rotation.rotate_key_file()
        if resumed:
            self.stdout.write("A rotation that had stopped was taken up again (credentials_key.new).")
        self.stdout.write(
            f"Re-sealed {resealed} credentials with a new key, now in {settings.STORE_DIR / 'credentials_key'}; "
            "the old key opens none of them."
        )

    def rotate_environment_key(self) -> None:
        try:
            lock = store_lock.acquire("credentials")
        except store_lock.StoreInUse as refused:
            raise CommandError(
                f"{refused.sentence()} Stop it first: it seals with CREDENTIALS_KEY, which stops opening "
                "the credentials once they are re-sealed."
            ) from None
        try:
            resealed = rotation.rotate_environment_key()
        finally:
            store_lock.release(lock)
        self.stdout.write(
            f"Re-sealed {resealed} credentials with CREDENTIALS_NEW_KEY. Now put that key in CREDENTIALS_KEY (and "
            "unset CREDENTIALS_NEW_KEY) wherever the worker gets its environment (its Secret on Kubernetes) before "
            "it starts again: the old key opens none of them."
        )
